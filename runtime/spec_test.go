package runtime

import (
	"reflect"
	"testing"
)

func TestSpecProcessArgs(t *testing.T) {
	img := Image{Entrypoint: []string{"/ep"}, Cmd: []string{"c1", "c2"}}
	for _, c := range []struct {
		cmd, args, want []string
	}{
		{nil, nil, []string{"/ep", "c1", "c2"}},
		{[]string{"/bin/x"}, nil, []string{"/bin/x"}},
		{nil, []string{"a"}, []string{"/ep", "a"}},
		{[]string{"/bin/x"}, []string{"a", "b"}, []string{"/bin/x", "a", "b"}},
	} {
		if got := processArgs(img, c.cmd, c.args); !reflect.DeepEqual(got, c.want) {
			t.Errorf("command %v args %v: %v, want %v", c.cmd, c.args, got, c.want)
		}
	}
	if got := processArgs(Image{Cmd: []string{"sh"}}, nil, []string{"-c", "x"}); !reflect.DeepEqual(got, []string{"-c", "x"}) {
		t.Errorf("no entrypoint, args only: %v", got)
	}
}

func TestSpecEnv(t *testing.T) {
	got := containerEnv(Image{Env: []string{"PATH=/bin", "A=img", "B=img"}}, []string{"B=pod", "C=pod", "A=pod2"})
	want := []string{"PATH=/bin", "A=pod2", "B=pod", "C=pod"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("env %v, want %v", got, want)
	}
	if got := containerEnv(Image{}, nil); !reflect.DeepEqual(got, []string{defaultPath}) {
		t.Errorf("default env %v", got)
	}
}

func TestSpecCapabilities(t *testing.T) {
	caps := capabilities(Security{CapDrop: []string{"NET_RAW", "cap_kill"}, CapAdd: []string{"sys_admin"}})
	set := map[string]bool{}
	for _, c := range caps {
		set[c] = true
	}
	if set["CAP_NET_RAW"] || set["CAP_KILL"] || !set["CAP_SYS_ADMIN"] || !set["CAP_CHOWN"] {
		t.Errorf("caps %v", caps)
	}
	if caps := capabilities(Security{CapDrop: []string{"ALL"}}); len(caps) != 0 {
		t.Errorf("drop ALL: %v", caps)
	}
	if caps := capabilities(Security{CapAdd: []string{"ALL"}}); len(caps) != len(allCaps()) {
		t.Errorf("add ALL: %d caps", len(caps))
	}
}

func TestSpecMounts(t *testing.T) {
	m, err := ociMount(Mount{Source: "/h", Destination: "/c", ReadOnly: true})
	if err != nil || m.Type != "bind" || !reflect.DeepEqual(m.Options, []string{"rbind", "rprivate", "ro"}) {
		t.Errorf("bind: %+v %v", m, err)
	}
	m, err = ociMount(Mount{Destination: "/t", Type: "tmpfs", Options: []string{"size=1m"}})
	if err != nil || m.Type != "tmpfs" || m.Source != "tmpfs" || m.Options[len(m.Options)-1] != "size=1m" {
		t.Errorf("tmpfs: %+v %v", m, err)
	}
	if _, err := ociMount(Mount{Destination: "rel"}); err == nil {
		t.Error("relative destination accepted")
	}
	if _, err := ociMount(Mount{Destination: "/x", Type: "nfs"}); err == nil {
		t.Error("unknown type accepted")
	}
}
