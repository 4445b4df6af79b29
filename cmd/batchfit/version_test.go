package main

import (
	"bytes"
	"context"
	"runtime/debug"
	"strings"
	"testing"
)

func TestBuildVersion(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i+1 < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"go install module@version", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3"},
		{"a checkout, recorded as a pseudo-version", debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261130200834-af25ae1c71a9+dirty"}},
			"v0.0.0-20261130200834-af25ae1c71a9+dirty"},
		{"a checkout, older Go", debug.BuildInfo{Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "af25ae1c71a9f00d", "vcs.time", "2026-11-30T20:08:34Z", "vcs.modified", "true")},
			"dev-af25ae1c71a9+dirty (2026-11-30T20:08:34 UTC)"},
		{"no version control", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	}
	for _, tt := range tests {
		if got := buildVersion(&tt.info); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// "batchfit version" prints what --version does.
func TestVersionCommand(t *testing.T) {
	var out, flag, stderr bytes.Buffer
	if code := run(context.Background(), []string{"version"}, strings.NewReader(""), &out, &stderr); code != 0 {
		t.Fatalf("batchfit version: exit %d, stderr %q", code, stderr.String())
	}
	if code := run(context.Background(), []string{"--version"}, strings.NewReader(""), &flag, &stderr); code != 0 {
		t.Fatalf("batchfit --version: exit %d, stderr %q", code, stderr.String())
	}
	if out.String() == "" || out.String() != flag.String() {
		t.Errorf("batchfit version printed %q, --version %q: want the same line", out.String(), flag.String())
	}
}
