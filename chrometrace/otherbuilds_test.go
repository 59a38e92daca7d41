package chrometrace

import (
	"strings"
	"testing"
)

// [memory] events of other builds (edge cases, synthetic): a build that
// writes "Total Reserved": 0 on every event while memory is allocated has
// not measured reserved memory, and "device_option Type"/"device_option
// Id" name the device where "Device Type"/"Device Id" are absent.
func TestMemoryEventsOfOtherBuilds(t *testing.T) {
	ev := func(ts, bytes, total int) string {
		return `{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 1, "ts": ` + itoa(ts) +
			`, "args": {"Bytes": ` + itoa(bytes) + `, "Addr": ` + itoa(1000+ts) + `, "Total Allocated": ` + itoa(total) +
			`, "Total Reserved": 0, "device_option Type": 1, "device_option Id": 2}}`
	}
	doc := `{"traceEvents": [` + ev(1, 1<<20, 1<<20) + `,` + ev(2, 1<<20, 2<<20) + `]}`
	tr, err := Read(strings.NewReader(doc), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Memory) != 2 || !tr.Memory[0].DeviceType.IsGPU() || tr.Memory[0].DeviceID != 2 {
		t.Fatalf("memory events %+v: want two on GPU 2", tr.Memory)
	}
	if !tr.MemorySchema.NoReserved || tr.Memory[1].Fields&MemTotalReserved != 0 {
		t.Errorf("Total Reserved 0 everywhere read as a measurement")
	}
	if !strings.Contains(strings.Join(tr.Warnings, "\n"), "does not fill it in") {
		t.Errorf("warnings %q: want the unfilled Total Reserved said", tr.Warnings)
	}
}
