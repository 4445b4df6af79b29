// Package slurmtest exists for tests, and only tests import it: it starts
// a real one-node Slurm cluster on this machine, munged, slurmctld and
// slurmd from the system's packages, with their own key, ports, state and
// logs in a temporary directory, and a node that offers four fake GPUs.
// Tests run Slurm's client commands against it with Cluster.Env (SLURM_CONF
// points at its slurm.conf); nothing of the system's own Slurm or munge
// setup is used or touched.
package slurmtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchfit/batchfit/internal/procgroup"
	"github.com/batchfit/batchfit/internal/testutil"
)

// GPUs is how many fake GPUs the node offers (gres gpu).
const GPUs = 4

// Features are the node's features, as GPU types for --constraint: the one
// node has them all.
var Features = []string{"h200sim", "a100sim"}

// KeepEnv, when set in the environment, keeps a stopped cluster's directory
// (configuration, daemon logs) for a look at what happened.
const KeepEnv = "SLURMTEST_KEEP"

// startTimeout bounds how long the cluster may take to come up.
const startTimeout = 30 * time.Second

// The programs a cluster needs; the project's test setup installs them
// (Debian: slurm-wlm and munge).
var programs = []string{"munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sinfo"}

// Cluster is a running one-node Slurm cluster.
type Cluster struct {
	Dir  string   // slurm.conf, state, logs, the munge socket and key
	Conf string   // path of slurm.conf
	Node string   // the node's name (the short host name)
	Env  []string // os.Environ() with SLURM_CONF set: run client commands in it

	daemons []*daemon
}

// daemon is one started daemon, stopped by its PID.
type daemon struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// skipError means the cluster cannot run here at all; tests skip with it.
type skipError struct{ reason string }

func (e *skipError) Error() string { return e.reason }

// Start starts a cluster for t and stops it when t ends. t is skipped when
// Slurm or munge is not installed or the test does not run as root.
func Start(t testing.TB) *Cluster {
	t.Helper()
	testutil.NeedsFull(t, "a Slurm cluster")
	c, err := start()
	var skip *skipError
	if errors.As(err, &skip) {
		t.Skip(skip.reason)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

var shared struct {
	sync.Mutex
	inMain  bool
	started bool
	c       *Cluster
	err     error
}

// Main runs a test binary's tests (call it from TestMain) and stops the
// cluster that Shared started, if any. It returns m.Run's exit code, or 1 if
// the cluster could not be stopped cleanly.
func Main(m *testing.M) int {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "slurmtest: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Shared returns the test binary's one cluster, starting it on first use, so
// that tests do not each pay for a start. The binary's TestMain must call
// Main, which stops it. t is skipped as in Start.
func Shared(t testing.TB) *Cluster {
	t.Helper()
	testutil.NeedsFull(t, "a Slurm cluster")
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		t.Fatal("slurmtest.Shared needs TestMain to call slurmtest.Main, which stops the cluster")
	}
	if !shared.started {
		shared.started = true
		shared.c, shared.err = start()
	}
	var skip *skipError
	if errors.As(shared.err, &skip) {
		t.Skip(skip.reason)
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.c
}

// Run runs a Slurm client command against the cluster and returns its
// stdout; a failure carries its stderr.
func (c *Cluster) Run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = c.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Jobs lists the IDs of the jobs in the cluster's queue (pending, running or
// completing).
func (c *Cluster) Jobs(ctx context.Context) ([]string, error) {
	out, err := c.Run(ctx, "squeue", "-h", "-o", "%i")
	return strings.Fields(out), err
}

func start() (*Cluster, error) {
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			return nil, &skipError{fmt.Sprintf("no %s on PATH: the Slurm tests need a local Slurm and munge (Debian: apt-get install slurm-wlm munge)", p)}
		}
	}
	if os.Geteuid() != 0 {
		return nil, &skipError{"the test cluster's slurmd must run as root to launch jobs; run the Slurm tests as root"}
	}
	dir, err := tempDir()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Conf: filepath.Join(dir, "slurm.conf")}
	c.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SLURM_CONF=") }), "SLURM_CONF="+c.Conf)
	if err := c.boot(); err != nil {
		err = fmt.Errorf("start the test Slurm cluster in %s: %w", dir, err)
		if serr := c.Stop(); serr != nil {
			err = fmt.Errorf("%w; then: %v", err, serr)
		}
		return nil, err
	}
	return c, nil
}

// tempDir makes the cluster's directory. The munge socket lives there, and
// a Unix socket path must stay under 108 bytes, so a long TMPDIR is passed
// over for /tmp.
func tempDir() (string, error) {
	parent := os.TempDir()
	if len(parent) > 60 {
		parent = "/tmp"
	}
	dir, err := os.MkdirTemp(parent, "slurmtest-")
	if err != nil {
		return "", fmt.Errorf("make the test cluster's directory: %w", err)
	}
	return dir, nil
}

func (c *Cluster) boot() error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("host name: %w", err)
	}
	c.Node, _, _ = strings.Cut(host, ".")
	cpus, mem, err := hardware()
	if err != nil {
		return err
	}
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	for _, d := range []string{"state", "spool"} {
		if err := os.Mkdir(filepath.Join(c.Dir, d), 0o700); err != nil {
			return err
		}
	}
	key := make([]byte, 1024)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "munge.key"), key, 0o400); err != nil {
		return err
	}
	// Slurm checks that a GPU's File is a device and numbers the GPU from
	// its name (CUDA_VISIBLE_DEVICES); links to /dev/null are both.
	for i := range GPUs {
		if err := os.Symlink("/dev/null", filepath.Join(c.Dir, "nvidia"+strconv.Itoa(i))); err != nil {
			return err
		}
	}
	files := map[string]string{
		"slurm.conf":     c.slurmConf(ports[0], ports[1], cpus, mem),
		"gres.conf":      fmt.Sprintf("AutoDetect=off\nNodeName=%s Name=gpu File=%s/nvidia[0-%d]\n", c.Node, c.Dir, GPUs-1),
		"plugstack.conf": "",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(c.Dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}

	sock := filepath.Join(c.Dir, "munge.sock")
	if err := c.startDaemon("munged", "munged", "--foreground", "--force",
		"--key-file="+filepath.Join(c.Dir, "munge.key"), "--socket="+sock,
		"--pid-file="+filepath.Join(c.Dir, "munged.pid"), "--seed-file="+filepath.Join(c.Dir, "munged.seed"),
		"--log-file="+filepath.Join(c.Dir, "munged.log")); err != nil {
		return err
	}
	if err := waitFor(10*time.Second, func() bool { _, err := os.Stat(sock); return err == nil }); err != nil {
		return fmt.Errorf("munged did not create its socket: %w%s", err, c.logs())
	}
	if err := c.startDaemon("slurmctld", "slurmctld", "-D", "-i", "-c", "-f", c.Conf); err != nil {
		return err
	}
	if err := c.startDaemon("slurmd", "slurmd", "-D", "-f", c.Conf, "-N", c.Node); err != nil {
		return err
	}
	var state string
	err = waitFor(startTimeout, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		out, _ := c.Run(ctx, "sinfo", "-h", "-N", "-n", c.Node, "-o", "%T")
		state = strings.TrimSpace(out)
		return state == "idle"
	})
	if err != nil {
		return fmt.Errorf("node %s is not idle (sinfo says %q): %w%s", c.Node, state, err, c.logs())
	}
	return nil
}

// slurmConf is the cluster's configuration: one node, one partition, no
// accounting, no cgroups (the tests must run in containers), and short waits
// so that jobs start and end quickly.
func (c *Cluster) slurmConf(ctldPort, slurmdPort, cpus, mem int) string {
	d := c.Dir
	lines := []string{
		"ClusterName=slurmtest",
		fmt.Sprintf("SlurmctldHost=%s(127.0.0.1)", c.Node),
		fmt.Sprintf("SlurmctldPort=%d", ctldPort),
		fmt.Sprintf("SlurmdPort=%d", slurmdPort),
		"SlurmUser=root",
		"SlurmdUser=root",
		"AuthType=auth/munge",
		"CredType=cred/munge",
		"AuthInfo=socket=" + filepath.Join(d, "munge.sock"),
		"StateSaveLocation=" + filepath.Join(d, "state"),
		"SlurmdSpoolDir=" + filepath.Join(d, "spool"),
		"SlurmctldPidFile=" + filepath.Join(d, "slurmctld.pid"),
		"SlurmdPidFile=" + filepath.Join(d, "slurmd.pid"),
		"SlurmctldLogFile=" + filepath.Join(d, "slurmctld.log"),
		"SlurmdLogFile=" + filepath.Join(d, "slurmd.log"),
		"PlugStackConfig=" + filepath.Join(d, "plugstack.conf"),
		"MailProg=/bin/true",
		"ProctrackType=proctrack/linuxproc",
		"TaskPlugin=task/none",
		"JobAcctGatherType=jobacct_gather/none",
		"AccountingStorageType=accounting_storage/none",
		"JobCompType=jobcomp/none",
		"MpiDefault=none",
		"SwitchType=switch/none",
		"SchedulerType=sched/builtin",
		// Schedule each job when it is submitted, not in batches every 3 s.
		"SchedulerParameters=batch_sched_delay=0",
		"SelectType=select/cons_tres",
		// CPUs only: with memory as a resource, every job would take the
		// whole node and the parallel tests could not run side by side.
		"SelectTypeParameters=CR_CPU",
		"GresTypes=gpu",
		// Finished jobs stay visible to scontrol for the whole test run:
		// there is no accounting database to ask afterwards.
		"MinJobAge=3600",
		"KillWait=2",
		"ReturnToService=2",
		"SlurmdParameters=config_overrides",
		fmt.Sprintf("NodeName=%s NodeAddr=127.0.0.1 CPUs=%d RealMemory=%d Gres=gpu:%d Features=%s State=UNKNOWN", c.Node, cpus, mem, GPUs, strings.Join(Features, ",")),
		"PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
	}
	return strings.Join(lines, "\n") + "\n"
}

// hardware reads the node's CPUs and memory (MiB) as slurmd sees them. At
// least two CPUs are declared (config_overrides allows it) so that two jobs
// can always run side by side.
func hardware() (cpus, mem int, err error) {
	out, err := exec.Command("slurmd", "-C").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("slurmd -C: %w", err)
	}
	for _, f := range strings.Fields(string(out)) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "CPUs":
			cpus, _ = strconv.Atoi(v)
		case "RealMemory":
			mem, _ = strconv.Atoi(v)
		}
	}
	if cpus == 0 || mem == 0 {
		return 0, 0, fmt.Errorf("slurmd -C gave no CPUs or RealMemory: %q", out)
	}
	return max(cpus, 2), mem, nil
}

// freePorts finds n TCP ports free now. Another program could take one
// before the daemons bind it; the start then fails with the daemon's log.
func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func (c *Cluster) startDaemon(name string, argv ...string) error {
	log := filepath.Join(c.Dir, name+".out")
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = c.Env
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = f, f
	// Its own process group keeps a terminal's Ctrl-C for the test binary,
	// which then stops the daemons in order; they die with the test binary
	// if it dies without cleaning up.
	cmd.SysProcAttr = procgroup.Attr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	d := &daemon{name: name, cmd: cmd, done: make(chan struct{}), log: log}
	go func() {
		_ = cmd.Wait()
		close(d.done)
	}()
	c.daemons = append(c.daemons, d)
	return nil
}

// Stop cancels every job left in the cluster, waits for them to end, stops
// the daemons by their PIDs (SIGTERM, then SIGKILL) in reverse start order
// and removes the cluster's directory (see KeepEnv).
func (c *Cluster) Stop() error {
	var errs []error
	if len(c.daemons) == 3 {
		if err := c.cancelAll(); err != nil {
			errs = append(errs, err)
		}
	}
	for i := len(c.daemons) - 1; i >= 0; i-- {
		d := c.daemons[i]
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
			errs = append(errs, fmt.Errorf("%s (pid %d) ignored SIGTERM for 10s and was killed", d.name, d.cmd.Process.Pid))
		}
	}
	c.daemons = nil
	if len(errs) > 0 {
		// Keep the directory: its logs say what went wrong.
		return fmt.Errorf("stop the test Slurm cluster (logs in %s): %w", c.Dir, errors.Join(errs...))
	}
	if os.Getenv(KeepEnv) != "" {
		fmt.Fprintf(os.Stderr, "slurmtest: %s is set: the cluster's files stay in %s\n", KeepEnv, c.Dir)
		return nil
	}
	return os.RemoveAll(c.Dir)
}

// cancelAll cancels the jobs still queued and waits until none is left, so
// that no job's processes outlive the cluster.
func (c *Cluster) cancelAll() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := c.Jobs(ctx)
	if err != nil || len(jobs) == 0 {
		return err
	}
	if _, err := c.Run(ctx, "scancel", jobs...); err != nil {
		return err
	}
	return waitFor(20*time.Second, func() bool {
		left, err := c.Jobs(ctx)
		return err == nil && len(left) == 0
	})
}

// logs returns the tails of the daemons' logs, for an error message.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, name := range []string{"munged.out", "slurmctld.out", "slurmd.out"} {
		data, err := os.ReadFile(filepath.Join(c.Dir, name))
		if err != nil {
			continue
		}
		if len(data) > 2000 {
			data = data[len(data)-2000:]
		}
		fmt.Fprintf(&b, "\n--- %s ---\n%s", name, data)
	}
	return b.String()
}

// waitFor polls ok until it holds or the time is up.
func waitFor(limit time.Duration, ok func() bool) error {
	deadline := time.Now().Add(limit)
	for {
		if ok() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gave up after %s", limit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
