package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
)

// SchemaVersion is the version of torchmem's JSON documents
// (cmd/torchmem/JSON.md). It changes when a field is renamed, removed or
// changes meaning; added fields do not change it.
const SchemaVersion = 1

// OwnSchema marks documents that follow a published schema of their own
// (SARIF): they carry no schema_version.
type OwnSchema interface{ OwnSchema() }

// WriteJSON prints v as indented JSON, with "schema_version" first when v
// is an object. encoding/json is used for output: its field order is the
// struct order, stable for scripts and goldens.
func WriteJSON(w io.Writer, v any) error {
	v = withEmptyLists(v)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	out := b.Bytes()
	if _, own := v.(OwnSchema); !own {
		out = withSchemaVersion(out)
	}
	_, err := w.Write(out)
	return err
}

// withEmptyLists makes every nil list in v an empty one, so that a list
// is [] in every document, never null (JSON.md's promise, kept here once
// rather than by each type). v is copied first when it is not a pointer;
// what it points to is set in place (the analyses are done by the time
// JSON is written). Types with their own MarshalJSON and byte slices are
// left as they are.
func withEmptyLists(v any) any {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return v
	}
	if rv.Kind() != reflect.Pointer {
		c := reflect.New(rv.Type())
		c.Elem().Set(rv)
		rv = c
	}
	fillLists(rv, map[uintptr]bool{})
	return rv.Interface()
}

var jsonMarshaler = reflect.TypeFor[json.Marshaler]()

func fillLists(v reflect.Value, seen map[uintptr]bool) {
	if v.Type().Implements(jsonMarshaler) || (v.CanAddr() && v.Addr().Type().Implements(jsonMarshaler) && v.Kind() != reflect.Struct) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return
		}
		seen[v.Pointer()] = true
		fillLists(v.Elem(), seen)
	case reflect.Interface:
		if !v.IsNil() && v.Elem().Kind() == reflect.Pointer {
			fillLists(v.Elem(), seen)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && f.Tag.Get("json") != "-" {
				fillLists(v.Field(i), seen)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return // bytes: a string in JSON
		}
		if v.IsNil() {
			if v.CanSet() {
				v.Set(reflect.MakeSlice(v.Type(), 0, 0))
			}
			return
		}
		for i := range v.Len() {
			fillLists(v.Index(i), seen)
		}
	case reflect.Array:
		for i := range v.Len() {
			fillLists(v.Index(i), seen)
		}
	}
}

// withSchemaVersion puts "schema_version" first in an indented JSON
// object (other documents are returned as they are).
func withSchemaVersion(doc []byte) []byte {
	field := fmt.Sprintf("\"schema_version\": %d", SchemaVersion)
	switch {
	case bytes.HasPrefix(doc, []byte("{\n")):
		return append([]byte("{\n  "+field+",\n"), doc[2:]...)
	case bytes.HasPrefix(doc, []byte("{}")):
		return append([]byte("{\n  "+field+"\n}"), doc[2:]...)
	}
	return doc
}
