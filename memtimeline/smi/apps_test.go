package smi

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/torchmem/torchmem/memtimeline/memtest"
)

func readAppsString(t *testing.T, s string) *AppsLog {
	t.Helper()
	log, err := ReadApps(strings.NewReader(s))
	if err != nil {
		t.Fatalf("ReadApps: %v\ninput:\n%s", err, s)
	}
	return log
}

// TestReadAppsVariants: the shapes nvidia-smi --query-compute-apps prints,
// each read to the same processes.
func TestReadAppsVariants(t *testing.T) {
	cases := []struct {
		name, in string
		rounds   int
		procs    []string // pid/name/gpu/bytes of each sample, in order
	}{
		{"one snapshot, units", "pid, process_name, used_gpu_memory [MiB]\n4242, /usr/bin/python3, 812 MiB\n77, python, 3 MiB\n", 1,
			[]string{"4242 /usr/bin/python3  812", "77 python  3"}},
		{"nounits, any order", "used_gpu_memory [MiB], gpu_uuid, pid\n812, GPU-1a2b, 4242\n", 1,
			[]string{"4242  GPU-1a2b 812"}},
		{"used_memory alias, unit in values", "pid, used_memory\n4242, 812 MiB\n", 1, []string{"4242   812"}},
		{"logged without timestamp: a pid seen again starts a round", "pid, process_name, used_gpu_memory [MiB]\n1, a, 1 MiB\n2, b, 2 MiB\n1, a, 3 MiB\n2, b, 4 MiB\n1, a, 5 MiB\n", 3,
			[]string{"1 a  1,3,5", "2 b  2,4"}},
		{"logged with timestamp", "timestamp, pid, process_name, used_gpu_memory [MiB], gpu_bus_id\n2026/12/01 21:00:00.100, 1, a, 10 MiB, 00000000:19:00.0\n2026/12/01 21:00:00.300, 1, a, 12 MiB, 00000000:19:00.0\n2026/12/01 21:00:00.300, 2, b, 7 MiB, 00000000:19:00.0\n", 2,
			[]string{"1 a 00000000:19:00.0 10,12", "2 b 00000000:19:00.0 7"}},
		{"a comma in a process name", "pid, process_name, used_gpu_memory [MiB]\n5, /opt/a,b/python, 9 MiB\n", 1, []string{"5 /opt/a,b/python  9"}},
		{"N/A memory (containers, WSL)", "pid, process_name, used_gpu_memory [MiB]\n5, python, [N/A]\n", 1, []string{"5 python  -1"}},
		{"header only: nothing ran", "pid, process_name, used_gpu_memory [MiB]\n", 0, nil},
		{"plain-text note in the log", "pid, process_name, used_gpu_memory [MiB]\nNo running processes found\n", 0, nil},
		{"truncated last line", "pid, process_name, used_gpu_memory [MiB]\n5, python, 9 MiB\n6, pyth", 1, []string{"5 python  9"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log := readAppsString(t, c.in)
			if log.Rounds != c.rounds {
				t.Errorf("rounds %d, want %d", log.Rounds, c.rounds)
			}
			var got []string
			for _, p := range log.Processes {
				var b []string
				for _, s := range p.Samples {
					if s.UsedBytes < 0 {
						b = append(b, "-1")
					} else {
						b = append(b, strconv.FormatInt(s.UsedBytes>>20, 10))
					}
				}
				got = append(got, strings.Join([]string{strconv.FormatInt(p.PID, 10), p.Name, p.GPU, strings.Join(b, ",")}, " "))
			}
			if strings.Join(got, "|") != strings.Join(c.procs, "|") {
				t.Errorf("processes\n got %q\nwant %q", got, c.procs)
			}
		})
	}
}

// TestReadAppsBad: wrong-kind and damaged input is one clear error.
func TestReadAppsBad(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", "empty"},
		{"no header", "4242, python3, 812 MiB\n", "no header"},
		{"a GPU log", "index, timestamp, memory.used [MiB]\n0, 2026/11/29 17:26:22.516, 5 MiB\n", "no header"},
		{"bad pid", "pid, used_gpu_memory [MiB]\nx, 5 MiB\n", "line 2: bad pid"},
		{"bad memory", "pid, used_gpu_memory [MiB]\n5, lots\n", "line 2: used_gpu_memory"},
		{"short row", "pid, process_name, used_gpu_memory [MiB]\n5, 9 MiB\n", "line 2: 2 fields"},
		{"binary", "pid, used_gpu_memory [MiB]\n\x00\x01\x02\n", "binary"},
	}
	for _, c := range cases {
		_, err := ReadApps(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
	}
	if _, err := ReadApps(strings.NewReader("4242, python3, 812 MiB\n")); !errors.Is(err, ErrNotAppsLog) {
		t.Errorf("no header: %v does not wrap ErrNotAppsLog", err)
	}
}

// FuzzReadAppsLog: any input is an error or a log whose invariants hold
// and which AnalyzeApps can analyze.
func FuzzReadAppsLog(f *testing.F) {
	f.Add([]byte("timestamp, pid, process_name, used_gpu_memory [MiB], gpu_uuid\n2026/12/01 21:00:00.100, 1, a, 10 MiB, GPU-1\n"))
	f.Add([]byte("pid, process_name, used_gpu_memory [MiB]\n1, a, 1 MiB\n1, a, 3 MiB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		log, ok := memtest.Accepts(t, ReadApps, data)
		if !ok {
			return
		}
		rows := 0
		for _, p := range log.Processes {
			for i := 1; i < len(p.Samples); i++ {
				if p.Samples[i].Time.Before(p.Samples[i-1].Time) {
					t.Fatalf("pid %d samples out of order", p.PID)
				}
			}
			for _, s := range p.Samples {
				if s.Round < 0 || s.Round >= log.Rounds {
					t.Fatalf("round %d of %d", s.Round, log.Rounds)
				}
			}
			rows += len(p.Samples)
		}
		if rows != log.Rows {
			t.Fatalf("rows %d, samples %d", log.Rows, rows)
		}
		a := AnalyzeApps(log, nil, DefaultOptions())
		if len(a.Processes) != len(log.Processes) {
			t.Fatalf("%d reports for %d processes", len(a.Processes), len(log.Processes))
		}
	})
}
