// Package memtest is the one place for what the tests of cmd/, memtimeline/
// and rules/ share: reading the repository's recorded inputs (testdata/ at
// the module root, found from any package depth), building synthetic ones,
// and an oracle read apart from the code under test.
//
// It offers:
//   - Testdata: the path of a file under testdata/, from any package.
//   - ReadAll: a file's bytes, gunzipped when it is gzip (the content
//     decides, as the readers do).
//   - ReadJSON: a truth.json, oracle or memory_stats file, unmarshaled.
//   - Decode: any reader's result for a file (gzipped or not), e.g.
//     Decode(t, path, snapshot.Read) or Decode(t, path, steplog.Read);
//     Trace, NamedTrace and GPUTrace for Chrome traces; NamedSnapshot
//     and GlobOne find files to decode.
//   - RunDir: a copy of the snippet's output directory with the unrelated
//     files a user's run directory also holds.
//   - RandomWalk: a random memory series with spikes (NewRand: seeded).
//   - Refuses: a reader refuses an input, saying what is wrong and
//     whether it is "not this kind" (a table's row).
//   - Accepts: a fuzz target's read, which may refuse its input but must
//     never return a value with the error.
//   - WriteFile: a synthetic input written into a test's folder.
//   - Synth: a synthetic Kineto trace, event by event; LastFrame.
//   - Oracle: what a Kineto trace records, read with encoding/json.
//
// It imports nothing of this module but chrometrace, so every test package
// can import it, including the internal tests of memtimeline and its
// readers (memtimeline/snapshot, its pickle decoder, memtimeline/steplog):
// the readers' own types come in through Decode's read function. The
// hostile-input bomb and heap sampler are chrometrace/bombtest (chrometrace
// must not import memtimeline).
package memtest
