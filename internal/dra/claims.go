package dra

import (
	"errors"
	"maps"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/nodelet/nodelet/internal/dra/state"
)

// claimInfo is a claim the node prepares or prepared (upstream's
// ClaimInfo): its checkpointed state, and whether its drivers prepared it
// (not checkpointed: after a restart a claim is prepared again, drivers'
// NodePrepareResources being idempotent) or are unpreparing it.
type claimInfo struct {
	state.ClaimInfoState
	prepared    bool
	unpreparing bool
	// preparing is closed when the call preparing the claim is done
	// (nil when none is).
	preparing chan struct{}
}

// newClaimInfo is the info of an allocated claim (upstream's
// newClaimInfoFromClaim), its drivers and the node operations they skip.
func newClaimInfo(claim *resourceapi.ResourceClaim, optionalNodeOperations bool) (*claimInfo, error) {
	if claim.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	drivers, err := driverStates(claim, optionalNodeOperations)
	if err != nil {
		return nil, err
	}
	return &claimInfo{ClaimInfoState: state.ClaimInfoState{ClaimUID: claim.UID, ClaimName: claim.Name, Namespace: claim.Namespace,
		PodUIDs: sets.New[string](), DriverState: drivers}}, nil
}

// driverStates is upstream's computeDriverStates: one entry per driver
// with devices in the allocation; a node operation is skipped for a
// driver when every one of its results skips it (or all operations).
func driverStates(claim *resourceapi.ResourceClaim, optionalNodeOperations bool) (map[string]state.DriverState, error) {
	devices := map[string]int{}
	skips := map[string]map[resourceapi.SkipNodeOperation]int{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		devices[r.Driver]++
		if len(r.SkipNodeOperations) == 0 {
			continue
		}
		if skips[r.Driver] == nil {
			skips[r.Driver] = map[resourceapi.SkipNodeOperation]int{}
		}
		if slices.Contains(r.SkipNodeOperations, resourceapi.SkipNodeOperationAll) {
			skips[r.Driver][resourceapi.SkipNodeOperationAll]++
			continue
		}
		for _, op := range r.SkipNodeOperations {
			skips[r.Driver][op]++
		}
	}
	out := make(map[string]state.DriverState, len(devices))
	for driver, total := range devices {
		var skipped []resourceapi.SkipNodeOperation
		if counts := skips[driver]; counts != nil {
			all := counts[resourceapi.SkipNodeOperationAll]
			if all == total {
				skipped = []resourceapi.SkipNodeOperation{resourceapi.SkipNodeOperationAll}
			} else {
				for op, n := range counts {
					if op != resourceapi.SkipNodeOperationAll && n+all == total {
						skipped = append(skipped, op)
					}
				}
				slices.Sort(skipped)
			}
		}
		if len(skipped) > 0 && !optionalNodeOperations {
			return nil, errors.New("DRAOptionalNodeOperations feature gate is disabled on kubelet")
		}
		out[driver] = state.DriverState{SkipNodeOperations: skipped}
	}
	return out, nil
}

// resetDevices forgets a driver's devices (before its new answer).
func (c *claimInfo) resetDevices(driver string) {
	if s, ok := c.DriverState[driver]; ok {
		s.Devices = nil
		c.DriverState[driver] = s
	}
}

// addDevice records a device a driver prepared.
func (c *claimInfo) addDevice(driver string, d state.Device) {
	if c.DriverState == nil {
		c.DriverState = map[string]state.DriverState{}
	}
	s := c.DriverState[driver]
	s.Devices = append(s.Devices, d)
	c.DriverState[driver] = s
}

// cdiDevices are the CDI device IDs of the claim's devices for request
// (every device when request is "", and a device of no request serves
// all).
func (c *claimInfo) cdiDevices(request string) []string {
	var out []string
	for _, drivers := range c.DriverState {
		for _, d := range drivers.Devices {
			if request == "" || len(d.RequestNames) == 0 || slices.Contains(d.RequestNames, request) {
				out = append(out, d.CDIDeviceIDs...)
			}
		}
	}
	return out
}

// claimCache are the claims by namespace/name, checkpointed in dir.
type claimCache struct {
	mu     sync.RWMutex
	dir    string
	claims map[string]*claimInfo
}

func claimKey(namespace, name string) string { return namespace + "/" + name }

// loadClaims reads dir's checkpoint (upstream's newClaimInfoCache).
func loadClaims(dir string) (*claimCache, error) {
	list, err := state.Load(dir)
	if err != nil {
		return nil, err
	}
	c := &claimCache{dir: dir, claims: map[string]*claimInfo{}}
	for _, s := range list {
		if s.PodUIDs == nil {
			s.PodUIDs = sets.New[string]()
		}
		c.claims[claimKey(s.Namespace, s.ClaimName)] = &claimInfo{ClaimInfoState: s}
	}
	return c, nil
}

// get is a claim (mu held).
func (c *claimCache) get(namespace, name string) (*claimInfo, bool) {
	info, ok := c.claims[claimKey(namespace, name)]
	return info, ok
}

// namesForPod are the claims a pod references (mu held).
func (c *claimCache) namesForPod(uid types.UID) []string {
	var out []string
	for _, info := range c.claims {
		if info.PodUIDs.Has(string(uid)) {
			out = append(out, info.ClaimName)
		}
	}
	slices.Sort(out)
	return out
}

// store writes the checkpoint (mu held).
func (c *claimCache) store() error {
	list := make(state.ClaimInfoStateList, 0, len(c.claims))
	for _, key := range slices.Sorted(maps.Keys(c.claims)) {
		list = append(list, c.claims[key].ClaimInfoState)
	}
	return state.Store(c.dir, list)
}

// inUse counts the prepared claims per driver, and all of them under
// "<any>" (upstream's claimsInUse; mu held).
func (c *claimCache) inUse() map[string]int {
	counts := map[string]int{"<any>": 0}
	for _, info := range c.claims {
		if !info.prepared {
			continue
		}
		counts["<any>"]++
		for driver := range info.DriverState {
			counts[driver]++
		}
	}
	return counts
}
