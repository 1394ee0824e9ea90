package checkpoint

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/fsutil"
)

// formatVersion is the entries' format; an entry of another version is
// reported and skipped.
const formatVersion = 1

// Defaults of Config's bounds.
const (
	DefaultMaxEntryBytes = 1 << 20
	DefaultMaxTotalBytes = 64 << 20
)

// Entry is what nodelet keeps of one pod.
type Entry struct {
	// Pod is the pod as last seen, its status the one nodelet last wrote.
	Pod        *v1.Pod         `json:"pod"`
	ConfigMaps []*v1.ConfigMap `json:"configMaps,omitempty"`
	// Secrets are kept only when the node allows it (--offline-secrets).
	Secrets []*v1.Secret `json:"secrets,omitempty"`
	// PersistentVolumeClaims, PersistentVolumes and CSIDrivers are what the
	// pod's CSI volumes were resolved with.
	PersistentVolumeClaims []*v1.PersistentVolumeClaim `json:"persistentVolumeClaims,omitempty"`
	PersistentVolumes      []*v1.PersistentVolume      `json:"persistentVolumes,omitempty"`
	CSIDrivers             []*storagev1.CSIDriver      `json:"csiDrivers,omitempty"`
	// Tokens are the service account tokens last requested for the pod.
	Tokens []Token `json:"tokens,omitempty"`
	// ServiceEnv is the service environment of the pod's namespace (with
	// its enableServiceLinks) last computed.
	ServiceEnv map[string]string `json:"serviceEnv,omitempty"`
	SavedAt    time.Time         `json:"savedAt"`
}

// Token is one service account token of a pod.
type Token struct {
	ServiceAccount    string `json:"serviceAccount"`
	Audience          string `json:"audience,omitempty"`
	ExpirationSeconds int64  `json:"expirationSeconds"`
	Value             string `json:"value"`
}

// file is an entry on disk: the payload and its checksum.
type file struct {
	Version  int             `json:"version"`
	Checksum string          `json:"checksum"`
	Data     json.RawMessage `json:"data"`
}

// Config configures a Store.
type Config struct {
	// Dir is where the entries live (created 0700).
	Dir string
	// MaxEntryBytes bounds one entry; MaxTotalBytes all of them
	// (DefaultMaxEntryBytes, DefaultMaxTotalBytes when zero).
	MaxEntryBytes, MaxTotalBytes int64
	// Clock stamps the entries (the real clock when nil).
	Clock clock.Clock
}

// Store keeps the entries in a directory. It is safe for concurrent use.
type Store struct {
	cfg Config
	mu  sync.Mutex
	// sizes are the entries' sizes on disk, by UID, as this process knows
	// them (read at New).
	sizes map[types.UID]int64
}

// New returns the store of cfg.Dir, creating the directory. It fails when
// cfg has no Dir or the directory cannot be made private.
func New(cfg Config) (*Store, error) {
	if cfg.Dir == "" {
		return nil, errors.New("checkpoint: Config.Dir is required")
	}
	if cfg.MaxEntryBytes == 0 {
		cfg.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if cfg.MaxTotalBytes == 0 {
		cfg.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	s := &Store{cfg: cfg, sizes: map[types.UID]int64{}}
	entries, _ := os.ReadDir(cfg.Dir)
	for _, e := range entries {
		if uid, ok := uidOf(e.Name()); ok {
			if fi, err := e.Info(); err == nil {
				s.sizes[uid] = fi.Size()
			}
		}
	}
	return s, nil
}

func uidOf(name string) (types.UID, bool) {
	if !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
		return "", false
	}
	return types.UID(strings.TrimSuffix(name, ".json")), true
}

func (s *Store) path(uid types.UID) string { return filepath.Join(s.cfg.Dir, string(uid)+".json") }

// Encode is an entry's file: its payload and checksum.
func Encode(e *Entry) ([]byte, error) { return encode(e) }

func encode(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	return json.Marshal(file{Version: formatVersion, Checksum: "sha256:" + hex.EncodeToString(sum[:]), Data: data})
}

// Decode reads an entry's file, refusing one whose checksum or version
// does not match or that is not whole.
func Decode(b []byte) (*Entry, error) {
	var e Entry
	if err := decode(b, &e); err != nil {
		return nil, err
	}
	if e.Pod == nil || e.Pod.UID == "" {
		return nil, errors.New("checkpoint entry without a pod")
	}
	return &e, nil
}

func decode(b []byte, v any) error {
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("not a whole checkpoint entry: %w", err)
	}
	if f.Version != formatVersion {
		return fmt.Errorf("checkpoint format version %d, want %d", f.Version, formatVersion)
	}
	sum := sha256.Sum256(f.Data)
	if f.Checksum != "sha256:"+hex.EncodeToString(sum[:]) {
		return errors.New("checksum mismatch: the entry is corrupt")
	}
	if err := json.Unmarshal(f.Data, v); err != nil {
		return fmt.Errorf("checkpoint payload: %w", err)
	}
	return nil
}

// Save writes the entry of e.Pod atomically, stamped now. It refuses an
// entry over MaxEntryBytes, or one that would take the store over
// MaxTotalBytes; the previous entry of the pod then stays.
func (s *Store) Save(e *Entry) error {
	if e.Pod == nil || e.Pod.UID == "" {
		return errors.New("checkpoint: an entry needs a pod with a UID")
	}
	c := *e
	c.SavedAt = s.cfg.Clock.Now().UTC().Truncate(time.Second)
	b, err := Encode(&c)
	if err != nil {
		return err
	}
	size := int64(len(b))
	uid := e.Pod.UID
	if size > s.cfg.MaxEntryBytes {
		return fmt.Errorf("checkpoint of pod %s/%s: %d bytes, over the %d bytes an entry may take", e.Pod.Namespace, e.Pod.Name, size, s.cfg.MaxEntryBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	total := size
	for u, n := range s.sizes {
		if u != uid {
			total += n
		}
	}
	if total > s.cfg.MaxTotalBytes {
		return fmt.Errorf("checkpoint of pod %s/%s: the store would take %d bytes, over its %d", e.Pod.Namespace, e.Pod.Name, total, s.cfg.MaxTotalBytes)
	}
	if err := fsutil.WriteFileAtomic(s.path(uid), b, 0o600); err != nil {
		return err
	}
	s.sizes[uid] = size
	return nil
}

// Load reads every entry, sorted by pod UID; the entries that cannot be
// read (corrupt, partial, another version) are reported in errs and
// skipped.
func (s *Store) Load() (entries []*Entry, errs []error) {
	names, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return nil, []error{err}
	}
	for _, n := range names {
		uid, ok := uidOf(n.Name())
		if !ok {
			continue
		}
		b, err := os.ReadFile(s.path(uid))
		if err == nil {
			var e *Entry
			if e, err = Decode(b); err == nil {
				if e.Pod.UID != uid {
					err = fmt.Errorf("entry of pod UID %s in the file of %s", e.Pod.UID, uid)
				} else {
					entries = append(entries, e)
					continue
				}
			}
		}
		errs = append(errs, fmt.Errorf("checkpoint %s: %w", n.Name(), err))
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Pod.UID < entries[j].Pod.UID })
	return entries, errs
}

// Remove deletes the entry of uid (none is fine).
func (s *Store) Remove(uid types.UID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Remove(s.path(uid)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	delete(s.sizes, uid)
	return nil
}

// Prune removes the entries of the pods keep refuses (the API server,
// synced, no longer has them) and leftover temporary files.
func (s *Store) Prune(keep func(types.UID) bool) error {
	names, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, n := range names {
		if strings.HasPrefix(n.Name(), ".tmp-") {
			_ = os.Remove(filepath.Join(s.cfg.Dir, n.Name()))
			continue
		}
		if uid, ok := uidOf(n.Name()); ok && !keep(uid) {
			if err := s.Remove(uid); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
