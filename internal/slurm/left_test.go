package slurm

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeQueue is a controller's queue: sbatch adds a job under its
// --job-name, squeue lists by -j or --name, scancel removes.
type fakeQueue struct {
	mu        sync.Mutex
	next      int
	jobs      map[string]string // id -> name
	cancelled []string
	// sbatchHangs makes sbatch queue the job and then not return before
	// its context ends: the batchfit running it never learns the id.
	sbatchHangs bool
}

func newFakeQueue() *fakeQueue { return &fakeQueue{next: 4242, jobs: map[string]string{}} }

func (q *fakeQueue) Run(ctx context.Context, name string, args ...string) ([]byte, []byte, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch name {
	case "sbatch":
		id := strconv.Itoa(q.next)
		q.next++
		for _, a := range args {
			if n, ok := strings.CutPrefix(a, "--job-name="); ok {
				q.jobs[id] = n
			}
		}
		if q.sbatchHangs {
			q.mu.Unlock()
			<-ctx.Done()
			q.mu.Lock()
			return nil, nil, ctx.Err()
		}
		return []byte(id + "\n"), nil, nil
	case "squeue":
		var out []string
		for i, a := range args {
			if n, ok := strings.CutPrefix(a, "--name="); ok {
				for id, jn := range q.jobs {
					if jn == n {
						out = append(out, id)
					}
				}
			}
			if a == "-j" {
				if _, ok := q.jobs[args[i+1]]; ok {
					out = append(out, "RUNNING")
				}
			}
		}
		slices.Sort(out)
		return []byte(strings.Join(out, "\n")), nil, nil
	case "scancel":
		for _, a := range args {
			if _, ok := q.jobs[a]; ok {
				delete(q.jobs, a)
				q.cancelled = append(q.cancelled, a)
			}
		}
		return nil, nil, nil
	}
	return nil, []byte(name + ": not faked"), errExit1
}

func (q *fakeQueue) queued() map[string]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string]string{}
	for id, n := range q.jobs {
		out[id] = n
	}
	return out
}

// jobRecord is what the history holds of a trial's job (trial.Spec.OnSubmit).
type jobRecord struct {
	mu      sync.Mutex
	name    string
	id      string
	cleared bool
}

func (r *jobRecord) onSubmit(name string) (func(string), func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.name = name
	return func(id string) {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.id = id
		}, func() {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.cleared = true
		}
}

// A batchfit that dies between sbatch queueing the job and learning its id
// (here sbatch never returns in time) has recorded the job's name before
// sbatch ran, and keeps the record; a later batchfit finds the job by that
// name, cancels it and only it, and reports its id.
func TestLeftJobFoundByName(t *testing.T) {
	q := newFakeQueue()
	q.jobs["4000"] = "someone-elses-job"
	q.sbatchHangs = true
	e := fakeExecutor(t, fakeSlurm(nil))
	e.cmds, e.cmdTimeout = q, 100*time.Millisecond
	var rec jobRecord
	spec := fakeSpec(t)
	spec.OnSubmit = rec.onSubmit
	if _, err := e.Run(context.Background(), spec, nil); err == nil {
		t.Fatal("a submission that timed out gave no error")
	}
	queued := q.queued()
	var left string
	for id, n := range queued {
		if n != "someone-elses-job" {
			left = id
		}
	}
	if left == "" || queued[left] != rec.name || !strings.HasPrefix(rec.name, DefaultJobName+"-") {
		t.Fatalf("queue %v, recorded name %q: want the job queued under the recorded name", queued, rec.name)
	}
	if rec.id != "" || rec.cleared {
		t.Fatalf("record id %q, cleared %v: an unknown id was recorded, or the record of a job that may be queued was cleared", rec.id, rec.cleared)
	}

	later := fakeExecutor(t, fakeSlurm(nil))
	later.cmds = q
	got, err := later.CancelLeft(context.Background(), rec.name, "")
	if err != nil || !slices.Equal(got, []string{left}) {
		t.Fatalf("CancelLeft = %v, %v; want [%s]", got, err, left)
	}
	if queued := q.queued(); len(queued) != 1 || queued["4000"] == "" {
		t.Errorf("queue after CancelLeft %v; want only someone else's job", queued)
	}
	// Nothing is left the second time, and nothing else is cancelled.
	if got, err := later.CancelLeft(context.Background(), rec.name, ""); err != nil || got != nil {
		t.Errorf("CancelLeft again = %v, %v; want nothing", got, err)
	}
	if !slices.Equal(q.cancelled, []string{left}) {
		t.Errorf("cancelled %v; want only %s", q.cancelled, left)
	}
}

// A batchfit that learnt the id records it, and clears the record once the
// job has left the queue. A later batchfit cancels by id, and leaves a job
// that has ended alone.
func TestJobRecordedByNameThenID(t *testing.T) {
	q := newFakeQueue()
	e := fakeExecutor(t, fakeSlurm(nil))
	e.cmds = q
	var rec jobRecord
	names := map[string]bool{}
	spec := fakeSpec(t)
	spec.OnSubmit = func(name string) (func(string), func()) {
		if len(q.queued()) != 0 {
			t.Error("OnSubmit heard of the job after sbatch had queued it")
		}
		names[name] = true
		return rec.onSubmit(name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(q.queued()) == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if res, err := e.Run(ctx, spec, nil); err != nil || !res.Canceled {
		t.Fatalf("Run = %+v, %v; want canceled", res, err)
	}
	if rec.id != "4242" || !rec.cleared {
		t.Errorf("record id %q, cleared %v; want id 4242, cleared once the job was gone", rec.id, rec.cleared)
	}
	for range 2 {
		j, err := e.prepare(spec)
		if err != nil {
			t.Fatal(err)
		}
		names[j.name] = true
	}
	if len(names) != 3 {
		t.Errorf("job names %v; want one per trial", names)
	}

	q.jobs["4300"] = "batchfit-left"
	later := fakeExecutor(t, fakeSlurm(nil))
	later.cmds = q
	if got, err := later.CancelLeft(context.Background(), "batchfit-renamed-by-sbatch-arg", "4300"); err != nil || !slices.Equal(got, []string{"4300"}) {
		t.Errorf("CancelLeft by id = %v, %v; want [4300]", got, err)
	}
	if got, err := later.CancelLeft(context.Background(), "batchfit-left", "4300"); err != nil || got != nil {
		t.Errorf("CancelLeft of an ended job = %v, %v; want nothing", got, err)
	}
}
