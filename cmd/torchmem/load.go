package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/torchmem/torchmem/chrometrace"
)

// progressMinBytes: smaller files load faster than a bar could be read.
const progressMinBytes = 32 << 20

// loadTrace reads one Kineto trace, printing its warnings to stderr and a
// progress bar when stderr is a terminal. Errors name the file and are
// marked as bad input (exit 2).
func loadTrace(path string, stderr io.Writer) (*chrometrace.Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, badInput(describeOpenError(path, err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	if st.IsDir() {
		return nil, badInput(fmt.Errorf("%s: is a directory, not a trace file", path))
	}
	var r io.Reader = f
	if st.Size() >= progressMinBytes && isTerminal(os.Stderr) {
		bar := progressbar.NewOptions64(st.Size(),
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("reading "+path),
			progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		defer bar.Finish()
		pr := progressbar.NewReader(f, bar)
		r = &pr
	}
	in, err := chrometrace.NewInput(r)
	if err != nil {
		return nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	defer in.Close()
	t, err := chrometrace.Read(in, chrometrace.ReadOptions{})
	if err != nil {
		var se *chrometrace.SyntaxError
		if in.Gzipped && errors.As(err, &se) {
			return nil, badInput(fmt.Errorf("%s: %w (after decompression: the gzip data may be corrupt)", path, err))
		}
		return nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	for _, w := range t.Warnings {
		fmt.Fprintf(stderr, "torchmem: warning: %s: %s\n", path, w)
	}
	return t, nil
}

func describeOpenError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied", path)
	}
	return err
}
