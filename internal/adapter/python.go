package adapter

import "context"

// Python is --framework auto for a Python command. Which framework the
// program uses is not known before its first trial (and a trial's
// environment is fixed when it starts), so every trial gets every
// framework's limit at once, each harmless to the others (torch ignores the
// XLA fraction, JAX the allocator options, and the TensorFlow limit is
// applied by the hook only if the program imports TensorFlow), and each
// report is read as the framework the hook found reporting memory (the
// event's "framework"): torch's figures when it used CUDA, else JAX's, else
// TensorFlow's.
type Python struct{}

// Name is "auto", as --framework takes it.
func (Python) Name() string { return FrameworkAuto }

// Hooked is true.
func (Python) Hooked() bool { return true }

// LimitEnv applies torch's, JAX's and TensorFlow's limit variables.
func (Python) LimitEnv(env []string, limit, total uint64) []string {
	for _, fw := range []Framework{Torch{}, JAX{}, TensorFlow{}} {
		env = fw.LimitEnv(env, limit, total)
	}
	return env
}

// LimitEnvReported is LimitEnv once the trials have reported which
// framework they use (Summary.Framework): that one is capped at
// limit/total; the others keep base/baseTotal, as the first trial had them,
// so that their variables stay the same from trial to trial (a fork server
// serves the trials of one environment, and the program reads none of them).
func (Python) LimitEnvReported(env []string, framework string, limit, total, base, baseTotal uint64) []string {
	for _, fw := range []Framework{Torch{}, JAX{}, TensorFlow{}} {
		if fw.Name() == framework {
			env = fw.LimitEnv(env, limit, total)
		} else {
			env = fw.LimitEnv(env, base, baseTotal)
		}
	}
	return env
}

// Peaks are those of the framework that reported.
func (Python) Peaks(s Summary) Peaks { return reported(s).Peaks(s) }

// EnforcesLimit is that of the framework that reported.
func (Python) EnforcesLimit(s Summary) bool { return reported(s).EnforcesLimit(s) }

// Version lists every framework installed for the command's interpreter.
func (Python) Version(ctx context.Context, argv []string) string {
	return Versions(ctx, argv, "torch", "jax", "jaxlib", "tensorflow")
}

// reported is the framework whose figures s holds; torch when none said.
func reported(s Summary) Framework {
	switch s.Framework {
	case FrameworkJAX:
		return JAX{}
	case FrameworkTensorFlow:
		return TensorFlow{}
	}
	return Torch{}
}
