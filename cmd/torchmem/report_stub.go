package main

import (
	"fmt"
	"io"

	"github.com/torchmem/torchmem/rules"
)

// writeReportFile writes the HTML report; the report command's file fills
// this in.
var writeReportFile = func(path string, sources []string, inputs []*rules.Input, rs []rules.Rule, stderr io.Writer) error {
	return badInput(fmt.Errorf("-o %s: the HTML report is not available in this build", path))
}
