package chrometrace

import "testing"

func TestIsLibraryFrame(t *testing.T) {
	for name, lib := range map[string]bool{
		"gen_traces.py(143): forward":                             false,
		"nn.Module: Linear_0":                                     false,
		"torch/nn/modules/module.py(1775): _call_impl":            true,
		"<built-in method append of list object at 0x7f09>":       true,
		"<frozen os>(762): encode":                                true,
		"typing.py(2154): cast":                                   true,
		"/opt/venv/lib/python3.12/site-packages/x/y.py(3): f":     true,
		"/home/me/torch/myproject/train.py(10): main":             false,
		"/home/me/src/pytorch/torch/nn/modules/conv.py(548): fwd": true,
		"/work/train.py(40): step":                                false,
	} {
		if got := IsLibraryFrame(name); got != lib {
			t.Errorf("IsLibraryFrame(%q) = %v", name, got)
		}
	}
	if f, ok := ParseFrame("gen_traces.py(143): forward"); !ok || f.Filename != "gen_traces.py" || f.Line != 143 || f.Name != "forward" {
		t.Errorf("ParseFrame: %+v %v", f, ok)
	}
	if got := NormalizeFrame("<built-in method append of list object at 0x7f09249ac140>"); got != "<built-in method append of list object>" {
		t.Errorf("NormalizeFrame: %q", got)
	}
}
