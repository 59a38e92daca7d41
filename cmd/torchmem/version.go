package main

import (
	_ "embed"
	"strings"
)

// versionFile is the one place the version lives: `torchmem --version`, the
// SARIF driver and the HTML report print it, and the Python wheel
// (cmd/torchmem/python/build.sh) takes its version from the same file. It is
// written in PEP 440's canonical form, which is also a plain dotted version,
// so pip and `torchmem --version` print the same string.
//
//go:embed VERSION
var versionFile string

var version = strings.TrimSpace(versionFile)
