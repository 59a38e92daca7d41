package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMaxValueBytes: past the one-value cap a command fails with exit 2
// and a message naming the file, the cap and the flag; the flag raises it.
func TestMaxValueBytes(t *testing.T) {
	dir := t.TempDir()
	// A trace padded with 2 MiB of spaces and a pickle holding a 2 MiB
	// string, both gzipped: small files, over a 1 MiB cap.
	write := func(name string, data []byte) string {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		zw.Write(data)
		zw.Close()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	trace := write("spaces.json.gz", []byte(`{"traceEvents":[`+strings.Repeat(" ", 2<<20)+
		`{"ph":"X","cat":"cpu_op","name":"a","pid":1,"tid":1,"ts":1,"dur":1}]}`))
	n := 2 << 20
	pickle := write("big.pickle.gz", append(append([]byte("\x80\x04\x8d"),
		byte(n), byte(n>>8), byte(n>>16), byte(n>>24), 0, 0, 0, 0), bytes.Repeat([]byte("a"), n)...))
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ops", "--max-value-bytes", "1MiB", trace}, 2, trace + ": a run of white space at byte 16 is over the limit of 1 MiB (--max-value-bytes raises it)"},
		{[]string{"ops", "--max-value-bytes", "4MiB", trace}, 0, ""},
		{[]string{"summarize", "--max-value-bytes", "1MiB", trace, "-o", filepath.Join(dir, "summaries")}, 2, trace + ": a run of white space at byte 16 is over the limit of 1 MiB (--max-value-bytes raises it)"},
		{[]string{"annotate", "--max-value-bytes", "1MiB", trace, "-o", filepath.Join(dir, "annotated.json")}, 2, trace + ": a run of white space at byte 16 is over the limit of 1 MiB (--max-value-bytes raises it)"},
		{[]string{"snapshot", "--max-value-bytes", "1M", pickle}, 2, pickle + ": pickle byte 2: a str of 2097152 bytes is over the limit of 1 MiB on one value (--max-value-bytes raises it)"},
		{[]string{"snapshot", "--max-value-bytes", "4194304", pickle}, 2, "truncated pickle"},
		{[]string{"ops", "--max-value-bytes", "-1", trace}, 2, "want a positive byte count"},
		// The count caps reach the trace reader of each command line alike.
		{[]string{"ops", "--max-events", "1000", realTrace("leak_module_cache")}, 2, realTrace("leak_module_cache") + ": more than 1000 events in one trace"},
		{[]string{"analyze", "--max-memory-events", "100", realTrace("leak_module_cache")}, 2, realTrace("leak_module_cache") + ": more than 100 [memory] events in one trace"},
		{[]string{"analyze", realTrace("leak_module_cache")}, 1, ""},
		// The model indexes a trace's records with int32: no cap above that.
		{[]string{"ops", "--max-events", "2GiB", realTrace("leak_module_cache")}, 2, "want a positive count up to 2147483647"},
		{[]string{"ops", "--max-memory-events", "2147483648", realTrace("leak_module_cache")}, 2, "up to 2147483647"},
		{[]string{"ops", "--max-memory-events", "2147483647", realTrace("leak_module_cache")}, 0, ""},
	}
	for _, c := range cases {
		_, errOut, code := torchmem(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}
