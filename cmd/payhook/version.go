package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

const versionHelp = `Usage: payhook version

Prints this build's version: the module version (or "devel" for a build
from a checkout), the commit it was built from and whether the checkout
had changes, and the Go version. Also payhook --version.`

func (m *Main) version(_ context.Context, args []string) error {
	fs := m.flags("version", versionHelp)
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	_, err := fmt.Fprintln(m.Stdout, versionText())
	return err
}

// versionText describes the running build, from what the Go toolchain
// recorded in it.
func versionText() string {
	version, commit, modified := "devel", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (with uncommitted changes)"
				}
			}
		}
	}
	out := "payhook " + version
	if commit != "" {
		out += ", commit " + commit + modified
	}
	return out + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
}
