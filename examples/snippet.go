// Package examples holds the drop-in Python snippet, embedded here so that
// `torchmem snippet` prints exactly the file users copy: one source of truth.
package examples

import _ "embed"

// TorchmemProfile is examples/torchmem_profile.py.
//
//go:embed torchmem_profile.py
var TorchmemProfile string
