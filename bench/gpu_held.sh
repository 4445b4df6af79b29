#!/usr/bin/env bash
# The held-card proof on real workloads, each answer then checked on a real
# card: batchfit search --memory-limit CARD with its defaults, then
# bench/card_check.py runs the command plainly at the answer and the size
# above while another process holds all but CARD of the GPU. Prints one
# row per workload: answer, how it was proven, trials, seconds, verdict.
#
#   bench/gpu_held.sh [BATCHFIT] [OUTDIR] [WORKLOADS...]
#   CARD=24GiB (default; a card's name, such as l4, needs CHECK_CARD, the
#   memory a CUDA process has on it: batchfit cards shows it, 22559MiB for
#   the L4); WORKLOADS: vit convnet lightning jax flax simclr lm hf ddp
#   (default: all; the zoo's, bench/zoo.py, flax: a Flax ResNet, and ddp:
#   the SimCLR workload as a one-process torchrun DDP job). Each command
#   names its steps, 3, as batchfit's default runs them, so that the check
#   runs what the trials ran.
set -u
bf=${1:-batchfit}
out=${2:-/tmp/held}
shift 2 2>/dev/null
card=${CARD:-24GiB}
check_card=${CHECK_CARD:-$card}
mkdir -p "$out"
workloads=("$@")
[ ${#workloads[@]} -eq 0 ] && workloads=(vit convnet lightning jax flax simclr lm hf ddp)

command_of() {
  case $1 in
  vit) echo python3 bench/workloads/vit.py --batch-size {} ;;
  convnet) echo python3 bench/workloads/convnet.py --batch-size {} ;;
  lightning) echo python3 examples/lightning_resnet/train.py fit --data.batch_size {} --trainer.max_steps 3 \
    --trainer.precision 16-mixed --trainer.logger false --trainer.enable_checkpointing false ;;
  jax) echo python3 examples/jax_optax/train.py --batch-size {} ;;
  flax) echo python3 bench/workloads/flax_convnet.py --batch-size {} ;;
  simclr) echo python3 examples/simclr_resnet50/train.py --batch-size {} --steps 3 ;;
  lm) echo python3 examples/transformer_lm/train.py --batch-size {} --steps 3 ;;
  hf) echo python3 examples/hf_trainer/train.py --output_dir /tmp/held-hf --per_device_train_batch_size {} \
    --bf16 --report_to none --save_strategy no --disable_tqdm true --max_steps 3 ;;
  ddp) echo python3 -m torch.distributed.run --nproc_per_node=1 examples/simclr_resnet50/train.py --batch-size {} --steps 3 ;;
  *) return 1 ;;
  esac
}

printf '%-10s %7s %6s %6s %8s  %s\n' workload answer proof trials seconds "real $card card"
for w in "${workloads[@]}"; do
  read -ra cmd <<<"$(command_of "$w")" || { echo "unknown workload $w" >&2; exit 2; }
  "$bf" search --no-db --memory-limit "$card" --json --log-dir "$out/logs-$w" -- "${cmd[@]}" >"$out/$w.json" 2>"$out/$w.err"
  read -r ans proof trials secs < <(python3 -c "
import json; r = json.load(open('$out/$w.json'))['runs'][0]
print(r['answer'] or '-', r['proof'] or '-', len(r['trials']), round(r['seconds']))")
  verdict=-
  if [ "$ans" != - ]; then
    jax=(); case $w in jax | flax) jax=(--jax) ;; esac
    python3 bench/card_check.py --card "$check_card" "${jax[@]}" --answer "$ans" -- "${cmd[@]}" >"$out/$w.check" 2>&1
    verdict=$(sed -n 's/^verdict: //p' "$out/$w.check")
  fi
  printf '%-10s %7s %6s %6s %8s  %s\n' "$w" "$ans" "$proof" "$trials" "$secs" "$verdict"
done
