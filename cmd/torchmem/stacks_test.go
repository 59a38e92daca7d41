package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func TestStacksJSONNamesTheLeakingLine(t *testing.T) {
	out, _, code := torchmem(t, "stacks", realTrace("leak_module_cache"), "--format", "json", "--sort", "live")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var doc struct {
		Stacks []struct {
			Frames          []string `json:"frames"`
			Operator        string   `json:"operator"`
			AllocBytes      int64    `json:"alloc_bytes"`
			LiveBytesAtEnd  int64    `json:"live_bytes_at_end"`
			LiveBytesAtPeak int64    `json:"live_bytes_at_peak"`
			Allocs          int64    `json:"allocs"`
		} `json:"stacks"`
	}
	decodeJSON(t, onlyInput(t, out), &doc)
	top := doc.Stacks[0]
	if top.Frames[len(top.Frames)-1] != "gen_traces.py(143): forward" || !strings.HasPrefix(top.Operator, "aten::clone") || top.LiveBytesAtEnd != 24<<20 {
		t.Errorf("top live site %+v", top)
	}
}

// Folded output parses as "frames weight" and its weights add up to what
// the table reports.
func TestStacksFolded(t *testing.T) {
	out, _, code := torchmem(t, "stacks", realTrace("resnet_train_clean"), "--folded")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var sum int64
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		i := strings.LastIndexByte(line, ' ')
		n, err := strconv.ParseInt(line[i+1:], 10, 64)
		if i < 0 || err != nil || n <= 0 || strings.Contains(line[:i], "\n") {
			t.Fatalf("bad folded line %q", line)
		}
		sum += n
	}
	js, _, _ := torchmem(t, "stacks", realTrace("resnet_train_clean"), "--format", "json", "--top", "0")
	var doc struct {
		Stacks []struct {
			AllocBytes int64 `json:"alloc_bytes"`
		} `json:"stacks"`
	}
	if err := json.Unmarshal([]byte(onlyInput(t, js)), &doc); err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, s := range doc.Stacks {
		want += s.AllocBytes
	}
	if sum != want || sum == 0 {
		t.Errorf("folded weights sum to %d, table to %d", sum, want)
	}
}

func TestStacksNoMemoryTraceSaysSo(t *testing.T) {
	_, errOut, code := torchmem(t, "stacks", realTrace("no_memory"))
	if code != 0 || !strings.Contains(errOut, "profile_memory=True") {
		t.Errorf("exit %d stderr %q", code, errOut)
	}
}
