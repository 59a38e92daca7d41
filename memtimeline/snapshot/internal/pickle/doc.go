// Package pickle is a purpose-built decoder for the Python pickles that
// torch.cuda.memory._dump_snapshot writes: protocols 2 to 5 of plain
// dict/list/tuple/str/int/float/bool/None with a memo. It exists because the
// available Go decoders were unfit: nlpodyssey/gopickle took 1.1 s, 180 MB of
// allocation and 53 MB of live heap on a 7 MB snapshot (and is unmaintained);
// kisielk/og-rek fails on protocol 5.
//
// Values live in a compact arena (Value handles of 8 bytes, no interface
// boxing), so the garbage collector sees a handful of large slices instead of
// millions of small objects. Class-building opcodes are refused: a snapshot
// is plain data, and resolving classes is how pickles run code.
//
// Decode returns the Arena and the root Value; an Arena's accessors (Str,
// Int64, Uint64, Dict, DictGet, List, ListID, Floats) read the values back.
// DecodeRecords takes a Recorder, which may pack each dict into a record of
// its own as soon as the dict is complete (Record then names it): the
// snapshot reader packs its millions of trace entries that way, so that they
// never exist as generic dicts. Only memtimeline/snapshot uses it.
package pickle
