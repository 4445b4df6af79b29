package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version is stamped into release builds with
// -ldflags "-X main.version=v1.2.3"; otherwise it comes from the build
// information Go records (buildVersion).
var version = ""

// newVersionCommand is "batchfit version", which prints what --version
// does: the word people type first.
func newVersionCommand(io *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print batchfit's version (as --version)",
		Args:  noArgs,
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintf(io.stdout, "batchfit version %s\n", currentVersion())
			return err
		}),
	}
}

// currentVersion returns the stamped version, else buildVersion's.
func currentVersion() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return buildVersion(info)
}

// buildVersion says which code a binary was built from: the module version
// `go install module@v1.2.3` recorded, else the commit of a build in a
// checkout (with "+dirty" for uncommitted changes), else "dev".
func buildVersion(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	rev := settings["vcs.revision"]
	if rev == "" {
		return "dev"
	}
	v := "dev-" + rev[:min(len(rev), 12)]
	if settings["vcs.modified"] == "true" {
		v += "+dirty"
	}
	if t := settings["vcs.time"]; t != "" {
		v += " (" + strings.TrimSuffix(t, "Z") + " UTC)"
	}
	return v
}
