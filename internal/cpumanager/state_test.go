package cpumanager

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/internal/checksum"
)

// TestChecksums: upstream's checksums of its own test checkpoints
// (state_checkpoint_test.go): the v4 data checksum and the v2 one.
func TestChecksums(t *testing.T) {
	if got := checksum.String(`{"policyName":"none","defaultCPUSet":"4-6","unknownField":"value"}`); got != 3492408555 {
		t.Errorf("data checksum %d, want upstream's 3492408555", got)
	}
	v2 := checkpointV2{PolicyName: "static", DefaultCPUSet: "7-9", Entries: map[string]map[string]string{"pod": {"container1": "4-6", "container2": "1-3"}}}
	if got := legacyChecksums(v2)[0]; got != 1942532442 {
		t.Errorf("v3 checksum %d, want upstream's 1942532442", got)
	}
	// Upstream's MarshalCheckpoint of the v2 part: the dump of
	// *state.CPUManagerCheckpointV2 renamed CPUManagerCheckpoint.
	if got, want := v2Checksum(v2), dumpChecksum("state.CPUManagerCheckpoint", v2, false); got != want || got != 964019483 {
		t.Errorf("v2 checksum %d", got)
	}
}

func TestStateRoundTripAndErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, StateFile)
	s := newState(PolicyStatic)
	s.defaultSet = cpuset.New(0, 3)
	s.set("uid1", "c", cpuset.New(1, 2))
	if err := s.store(path); err != nil {
		t.Fatal(err)
	}
	got, err := loadState(path, PolicyStatic)
	if err != nil {
		t.Fatal(err)
	}
	if !got.defaultSet.Equals(s.defaultSet) || !got.assignments["uid1"]["c"].Equals(cpuset.New(1, 2)) {
		t.Errorf("restored %+v", got)
	}
	if _, err := loadState(path, PolicyNone); err == nil || !strings.Contains(err.Error(), `configured policy "none" differs from state checkpoint policy "static"`) {
		t.Errorf("other policy: %v", err)
	}
	raw, _ := os.ReadFile(path)
	if err := os.WriteFile(path, []byte(strings.Replace(string(raw), `\"1-2\"`, `\"1-3\"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(path, PolicyStatic); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Errorf("tampered data: %v", err)
	}
	// An upstream v4 file (its test's) reads.
	up := `{"policyName":"other","defaultCPUSet":"1-9","checksum":1234,` +
		`"data":"{\"policyName\":\"none\",\"defaultCPUSet\":\"4-6\",\"unknownField\":\"value\"}","dataChecksum":3492408555}`
	if err := os.WriteFile(path, []byte(up), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := loadState(path, PolicyNone); err != nil || !got.defaultSet.Equals(cpuset.New(4, 5, 6)) {
		t.Errorf("upstream file: %v %+v", err, got)
	}
	// An older kubelet's v3 file (upstream's test's) reads too.
	old := `{"policyName":"static","defaultCPUSet":"7-9","entries":{"pod":{"container1":"4-6","container2":"1-3"}},"checksum":1942532442}`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := loadState(path, PolicyStatic); err != nil || !got.assignments["pod"]["container2"].Equals(cpuset.New(1, 2, 3)) {
		t.Errorf("v3 file: %v %+v", err, got)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(old, "7-9", "7-8", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadState(path, PolicyStatic); err == nil || !strings.Contains(err.Error(), "corrupted") {
		t.Errorf("tampered v3 file: %v", err)
	}
	if _, err := loadState(filepath.Join(dir, "missing"), PolicyStatic); err != nil {
		t.Errorf("no file: %v", err)
	}
}

func TestValidateState(t *testing.T) {
	all, reserved := cpuset.New(0, 1, 2, 3), cpuset.New(0)
	for _, tc := range []struct {
		name   string
		def    cpuset.CPUSet
		assign map[string]cpuset.CPUSet
		strict bool
		err    string
		want   cpuset.CPUSet
	}{
		{name: "empty: initialized", def: cpuset.New(), want: all},
		{name: "empty, strict", def: cpuset.New(), strict: true, want: cpuset.New(1, 2, 3)},
		{name: "empty with assignments", def: cpuset.New(), assign: map[string]cpuset.CPUSet{"c": cpuset.New(1)}, err: "default cpuset cannot be empty"},
		{name: "reserved missing", def: cpuset.New(1, 2, 3), err: `not all reserved cpus: "0" are present in defaultCpuSet: "1-3"`},
		{name: "strict, reserved present", def: cpuset.New(0, 1, 2, 3), strict: true, err: `some of strictly reserved cpus: "0" are present in defaultCpuSet: "0-3"`},
		{name: "overlap", def: cpuset.New(0, 1, 2, 3), assign: map[string]cpuset.CPUSet{"c": cpuset.New(1)}, err: `pod: uid, container: c cpuset: "1" overlaps with default cpuset "0-3"`},
		{name: "CPUs changed", def: cpuset.New(0, 1), assign: map[string]cpuset.CPUSet{"c": cpuset.New(2)}, err: `current set of available CPUs "0-3" doesn't match with CPUs in state "0-2"`},
		{name: "consistent", def: cpuset.New(0, 1), assign: map[string]cpuset.CPUSet{"c": cpuset.New(2, 3)}, want: cpuset.New(0, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(PolicyStatic)
			s.defaultSet = tc.def
			for name, set := range tc.assign {
				s.set("uid", name, set)
			}
			err := validateState(s, all, reserved, tc.strict)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !s.defaultSet.Equals(tc.want) {
				t.Errorf("err %v, default %s, want %s", err, s.defaultSet, tc.want)
			}
		})
	}
}
