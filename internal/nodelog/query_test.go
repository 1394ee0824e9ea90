package nodelog

import (
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"
)

func TestParse(t *testing.T) {
	since := time.Date(2026, 12, 6, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		raw     string
		want    *Query
		wantErr string
	}{
		{name: "no query", raw: "", want: nil},
		{name: "empty query", raw: "query", wantErr: `query: Invalid value: [""]: may not be empty`},
		{name: "blank query", raw: "query=%20%20", wantErr: "may not be empty"},
		{name: "service", raw: "query=kubelet", want: &Query{Services: []string{"kubelet"}}},
		{name: "services and file", raw: "query=kubelet&query=/foo.log&query=containerd",
			want: &Query{Services: []string{"kubelet", "containerd"}, Files: []string{"/foo.log"}}},
		{name: "windows path is a file", raw: `query=a\b`, want: &Query{Files: []string{`a\b`}}},
		{name: "options", raw: "query=kubelet&sinceTime=2026-12-06T03:04:05Z&tailLines=3&boot=-1&pattern=contain.r",
			want: &Query{Services: []string{"kubelet"}, Options: Options{SinceTime: &since, TailLines: ptr.To(3), Boot: ptr.To(-1), Pattern: "contain.r"}}},
		{name: "options alone", raw: "tailLines=3", want: &Query{Options: Options{TailLines: ptr.To(3)}}},
		{name: "bad time", raw: "query=kubelet&untilTime=yesterday", wantErr: "untilTime: Invalid value: \"yesterday\": invalid time format"},
		{name: "bad tail", raw: "query=kubelet&tailLines=x", wantErr: "tailLines: Invalid value: \"x\""},
		{name: "bad boot", raw: "query=kubelet&boot=x", wantErr: "boot: Invalid value: \"x\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := url.ParseQuery(tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			got, errs := Parse(v)
			if tc.wantErr != "" {
				if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) {
					t.Fatalf("errors %v, want %q", errs, tc.wantErr)
				}
				return
			}
			if len(errs) > 0 {
				t.Fatalf("errors %v", errs)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "foo.log"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	early := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	late := early.Add(time.Hour)
	for _, tc := range []struct {
		name    string
		q       Query
		wantErr string
	}{
		{name: "service", q: Query{Services: []string{"kubelet"}}},
		{name: "template unit", q: Query{Services: []string{"getty@tty1"}}},
		{name: "file", q: Query{Files: []string{"/foo.log"}}},
		{name: "options only", q: Query{Options: Options{TailLines: ptr.To(1)}}, wantErr: "query: Required value: cannot be empty with options"},
		{name: "unsafe service", q: Query{Services: []string{"kubelet --all"}}, wantErr: "input contains unsupported characters"},
		{name: "long service", q: Query{Services: []string{strings.Repeat("a", 257)}}, wantErr: "length must be less than 256"},
		{name: "too many", q: Query{Services: []string{"a", "b", "c", "d", "e"}}, wantErr: "query: Too many: 5: must have at most 4 items"},
		{name: "file and service", q: Query{Services: []string{"a"}, Files: []string{"/foo.log"}}, wantErr: "cannot specify a file and service"},
		{name: "two files", q: Query{Files: []string{"/foo.log", "/bar.log"}}, wantErr: "cannot specify more than one file"},
		{name: "file with options", q: Query{Files: []string{"/foo.log"}, Options: Options{Pattern: "x"}}, wantErr: "cannot specify file with options"},
		{name: "missing file", q: Query{Files: []string{"/bar.log"}}, wantErr: "no such file or directory"},
		{name: "relative file", q: Query{Files: []string{"./foo.log"}}},
		{name: "escaping file", q: Query{Files: []string{"../../etc/passwd"}}, wantErr: "path escapes from parent"},
		{name: "until before since", q: Query{Services: []string{"a"}, Options: Options{SinceTime: &late, UntilTime: &early}}, wantErr: "must be after `sinceTime`"},
		{name: "future boot", q: Query{Services: []string{"a"}, Options: Options{Boot: ptr.To(1)}}, wantErr: "boot: Invalid value: 1: must be less than 1"},
		{name: "previous boot", q: Query{Services: []string{"a"}, Options: Options{Boot: ptr.To(-1)}}},
		{name: "negative tail", q: Query{Services: []string{"a"}, Options: Options{TailLines: ptr.To(-1)}}, wantErr: "must be between 0 and 100000"},
		{name: "huge tail", q: Query{Services: []string{"a"}, Options: Options{TailLines: ptr.To(100001)}}, wantErr: "must be between 0 and 100000"},
		{name: "bad pattern", q: Query{Services: []string{"a"}, Options: Options{Pattern: "(x"}}, wantErr: "pattern: Invalid value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.q.Validate(dir)
			if tc.wantErr == "" {
				if len(errs) > 0 {
					t.Fatalf("errors %v", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.wantErr) {
				t.Fatalf("errors %v, want %q", errs, tc.wantErr)
			}
		})
	}
}

func TestJournalArgs(t *testing.T) {
	since := time.Date(2026, 12, 6, 3, 4, 5, 0, time.UTC)
	until := since.Add(90 * time.Minute)
	for _, tc := range []struct {
		name     string
		q        Query
		services []string
		want     []string
	}{
		{name: "plain", services: []string{"kubelet"},
			want: []string{"--utc", "--no-pager", "--output=short-precise", "--unit=kubelet"}},
		{name: "every option", services: []string{"kubelet", "containerd"},
			q: Query{Options: Options{SinceTime: &since, UntilTime: &until, TailLines: ptr.To(3), Pattern: "container", Boot: ptr.To(0)}},
			want: []string{"--utc", "--no-pager", "--output=short-precise", "--since=2026-12-6 03:4:5", "--until=2026-12-6 04:34:5",
				"--pager-end", "--lines=3", "--unit=kubelet", "--unit=containerd", "--grep=container", "--boot", "0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.q.JournalArgs(tc.services); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestJournalKnows(t *testing.T) {
	units := "containerd.service\nnodelet.service\nsystemd-logind.service\n"
	for svc, want := range map[string]bool{"nodelet": true, "containerd": true, "kubelet": false, "logind": true} {
		if got := journalKnows(units, svc); got != want {
			t.Errorf("journalKnows(%q) = %v, want %v", svc, got, want)
		}
	}
}
