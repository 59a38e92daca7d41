package chrometrace

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
)

// TestWriteTiledTrace builds a large trace for whole-process measurements
// by tiling big_transformer's events N times, each copy shifted in time
// after the previous one. It runs only when asked:
//
//	TORCHMEM_TILE_OUT=/tmp/big.json TORCHMEM_TILE_COPIES=14 go test ./chrometrace -run TestWriteTiledTrace
//
// (14 copies of the 76 MB trace make about 1 GB.) The file is not kept in
// the repository.
func TestWriteTiledTrace(t *testing.T) {
	out := os.Getenv("TORCHMEM_TILE_OUT")
	if out == "" {
		t.Skip("set TORCHMEM_TILE_OUT (and TORCHMEM_TILE_COPIES) to write a tiled trace")
	}
	copies, err := strconv.Atoi(os.Getenv("TORCHMEM_TILE_COPIES"))
	if err != nil || copies < 1 {
		copies = 14
	}
	data := gunzipFile(t, filepath.Join("..", "testdata", "traces", "big_transformer", "trace.json.gz"))
	open := bytes.Index(data, []byte(`"traceEvents": [`))
	closeIdx := bytes.LastIndex(data, []byte("\n  ],"))
	if open < 0 || closeIdx < open {
		t.Fatal("cannot find the traceEvents array")
	}
	head, body, tail := data[:open+len(`"traceEvents": [`)], data[open+len(`"traceEvents": [`):closeIdx], data[closeIdx:]
	tsRe := regexp.MustCompile(`"ts": (\d+)\.(\d{3})`)
	var first, last int64 = -1, 0
	for _, m := range tsRe.FindAllSubmatch(body, -1) {
		v, _ := strconv.ParseInt(string(m[1]), 10, 64)
		if first < 0 || v < first {
			first = v
		}
		last = max(last, v)
	}
	span := last - first + 1000 // µs between copies
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	w.Write(head)
	for k := 0; k < copies; k++ {
		if k > 0 {
			w.WriteString(",")
		}
		shift := int64(k) * span
		w.Write(tsRe.ReplaceAllFunc(body, func(m []byte) []byte {
			sub := tsRe.FindSubmatch(m)
			v, _ := strconv.ParseInt(string(sub[1]), 10, 64)
			return []byte(`"ts": ` + strconv.FormatInt(v+shift, 10) + "." + string(sub[2]))
		}))
	}
	w.Write(tail)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	t.Logf("wrote %s: %d copies, %d bytes", out, copies, st.Size())
}
