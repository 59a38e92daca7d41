package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/klauspost/pgzip"
	"github.com/torchmem/torchmem/internal/gzmembers"
)

// The inputs are real recordings tiled: big_transformer's Kineto trace (76
// MB of JSON) copied N times, each copy shifted in time after the previous
// one, and frag_small_allocs' allocator snapshot with its history copied N
// times by testdata/snapshots/tile_snapshot.py (Python's pickle writes it,
// as torch does). Each is written once per size into the work directory,
// plain and gzipped, and reused.

const (
	traceSource    = "testdata/traces/big_transformer/trace.json.gz"
	snapshotSource = "testdata/snapshots/frag_small_allocs.pickle.gz"
	snapshotTiler  = "testdata/snapshots/tile_snapshot.py"
)

var tsRe = regexp.MustCompile(`"ts": (\d+)\.(\d{3})`)

// tiledTrace writes the gzipped Kineto trace source (big_transformer's in
// the benchmark, a smaller one in its test) tiled copies times to path.
func tiledTrace(source, path string, copies int) error {
	data, err := gunzip(source)
	if err != nil {
		return err
	}
	const arr = `"traceEvents": [`
	open := bytes.Index(data, []byte(arr))
	closeIdx := bytes.LastIndex(data, []byte("\n  ],"))
	if open < 0 || closeIdx < open {
		return fmt.Errorf("%s: cannot find the traceEvents array", source)
	}
	head, body, tail := data[:open+len(arr)], data[open+len(arr):closeIdx], data[closeIdx:]
	// Every timestamp once; each copy rewrites them shifted.
	matches := tsRe.FindAllSubmatchIndex(body, -1)
	var first, last int64 = -1, 0
	vals := make([]int64, len(matches))
	for i, m := range matches {
		v, _ := strconv.ParseInt(string(body[m[2]:m[3]]), 10, 64)
		vals[i] = v
		if first < 0 || v < first {
			first = v
		}
		last = max(last, v)
	}
	span := last - first + 1000 // µs between copies
	return writeAtomically(path, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		bw.Write(head)
		var num []byte
		for k := range copies {
			if k > 0 {
				bw.WriteString(",")
			}
			prev := 0
			for i, m := range matches {
				bw.Write(body[prev:m[2]])
				num = strconv.AppendInt(num[:0], vals[i]+int64(k)*span, 10)
				bw.Write(num)
				prev = m[3]
			}
			bw.Write(body[prev:])
		}
		bw.Write(tail)
		return bw.Flush()
	})
}

// tiledSnapshot writes frag_small_allocs' snapshot with its history tiled
// copies times to path, with python3.
func tiledSnapshot(root, python, path string, copies int) error {
	src := path + ".src.pickle"
	data, err := gunzip(filepath.Join(root, snapshotSource))
	if err != nil {
		return err
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		return err
	}
	defer os.Remove(src)
	tmp := path + ".tmp"
	cmd := exec.Command(python, filepath.Join(root, snapshotTiler), src, tmp, strconv.Itoa(copies))
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%s: %w", snapshotTiler, err)
	}
	return os.Rename(tmp, path)
}

// gzipCopy writes src gzipped (level 6, gzip's default) to src+".gz", as
// one stream.
func gzipCopy(src string) error {
	return compress(src, src+".gz", func(w io.Writer) (io.WriteCloser, error) { return pgzip.NewWriterLevel(w, 6) })
}

// membersSuffix names the trace gzipped as the snippet gzips it.
const membersSuffix = ".members.json.gz"

// gzipMembers writes src as the snippet writes a trace: gzip members of
// 1 MiB of input, each naming its compressed size (gzmembers.Writer).
func gzipMembers(src, dst string) error {
	return compress(src, dst, func(w io.Writer) (io.WriteCloser, error) { return gzmembers.NewWriter(w, 6) })
}

// compress writes src to dst through the compressor newWriter makes.
func compress(src, dst string, newWriter func(io.Writer) (io.WriteCloser, error)) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeAtomically(dst, func(w io.Writer) error {
		zw, err := newWriter(w)
		if err != nil {
			return err
		}
		if _, err := io.Copy(zw, in); err != nil {
			return err
		}
		return zw.Close()
	})
}

// writeAtomically writes path through a temporary file renamed at the end,
// so that an interrupted run leaves no half file to be reused.
func writeAtomically(path string, write func(io.Writer) error) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	err = write(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

func gunzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := pgzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(zr)
}

func exists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Size() > 0
}

// ensure makes path with make unless it is there.
func ensure(path string, logf func(string, ...any), make func() error) error {
	if exists(path) {
		return nil
	}
	logf("writing %s", path)
	if err := make(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if !exists(path) {
		return errors.New("writing " + path + ": nothing written")
	}
	return nil
}
