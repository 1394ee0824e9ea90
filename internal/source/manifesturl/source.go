package manifesturl

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/nodelet/nodelet/internal/podspec"
	"github.com/nodelet/nodelet/internal/source/manifest"
)

// MaxLength is the longest answer read, upstream's maxConfigLength.
const MaxLength = 10 << 20

// Timeout bounds one GET, as upstream's client (a timed-out read is retried
// at the next period).
const Timeout = 10 * time.Second

// Config configures a Source.
type Config struct {
	// URL is staticPodURL.
	URL string
	// Header is sent with every GET (staticPodURLHeader).
	Header http.Header
	// NodeName suffixes pod names.
	NodeName string
	// Period is httpCheckFrequency.
	Period time.Duration
	// Client does the GETs; by default one with Timeout.
	Client *http.Client
	// Clock drives the period; a fake one in tests.
	Clock clock.WithTicker
}

// Source polls the manifest URL. Updates carries the full set of pods each
// time it changes.
type Source struct {
	cfg     Config
	updates chan []*v1.Pod

	// Owned by the Run goroutine.
	data     []byte            // the last answer decoded
	dataErr  error             // why data is not a valid manifest (nil: it is)
	seen     map[string]string // pod UID -> config.seen annotation
	sent     bool              // a set was sent
	empty    bool              // the last set sent was empty
	failures int
}

// New returns a Source for cfg.
func New(cfg Config) (*Source, error) {
	switch {
	case cfg.URL == "":
		return nil, errors.New("manifesturl: Config.URL is required")
	case cfg.NodeName == "":
		return nil, errors.New("manifesturl: Config.NodeName is required")
	case cfg.Period <= 0:
		return nil, fmt.Errorf("manifesturl: Config.Period must be positive, got %v", cfg.Period)
	}
	req, err := http.NewRequest(http.MethodGet, cfg.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("manifesturl: %w", err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return nil, fmt.Errorf("manifesturl: URL %q is neither http nor https", cfg.URL)
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: Timeout}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Source{cfg: cfg, updates: make(chan []*v1.Pod, 1), seen: map[string]string{}}, nil
}

// Updates returns the channel of pod sets. Only the latest set matters: an
// unread older set is replaced.
func (s *Source) Updates() <-chan []*v1.Pod { return s.updates }

// Run polls the URL until ctx is done.
func (s *Source) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("source", "http", "url", s.cfg.URL)
	ctx = klog.NewContext(ctx, logger)
	logger.Info("Reading static pods from the manifest URL", "period", s.cfg.Period)
	s.poll(ctx)
	ticker := s.cfg.Clock.NewTicker(s.cfg.Period)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
			s.poll(ctx)
		}
	}
}

// poll reads the URL once, sends the set if it changed and logs a failure.
func (s *Source) poll(ctx context.Context) {
	logger := klog.FromContext(ctx)
	err := s.read(ctx)
	switch {
	case err == nil:
		if s.failures > 0 {
			logger.Info("Read pods from the manifest URL again", "failures", s.failures)
		}
		s.failures = 0
		return
	case ctx.Err() != nil:
		return
	case s.failures < 3:
		logger.Error(err, "Cannot read pods from the manifest URL; keeping the pods of its last answer")
	case s.failures == 3:
		logger.Error(err, "Cannot read pods from the manifest URL; keeping the pods of its last answer (further failures logged at V(4))")
	default:
		logger.V(4).Info("Cannot read pods from the manifest URL", "err", err)
	}
	s.failures++
}

func (s *Source) read(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return err
	}
	req.Header = s.cfg.Header.Clone()
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxLength+1))
	if err != nil {
		return err
	}
	if len(data) > MaxLength {
		return fmt.Errorf("the answer is longer than %d bytes", MaxLength)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", s.cfg.URL, resp.Status)
	}
	if len(data) == 0 {
		// As upstream: an empty answer is an empty set.
		s.data, s.dataErr = nil, nil
		if s.send(ctx, nil) {
			klog.FromContext(ctx).Info("The manifest URL answered nothing: no pods from it")
		}
		return nil
	}
	if bytes.Equal(data, s.data) {
		return s.dataErr // decoded once; the same bad answer stays a failure
	}
	s.data = data
	pods, warnings, err := manifest.Decode(data, podspec.Origin{Source: podspec.HTTPSource, Location: s.cfg.URL}, s.cfg.NodeName)
	if err != nil {
		s.dataErr = fmt.Errorf("the answer of %s is not a valid static pod manifest: %w", s.cfg.URL, err)
		return s.dataErr
	}
	s.dataErr = nil
	for _, w := range warnings {
		klog.FromContext(ctx).Info("The manifest URL's pods have fields nodelet ignores", "warning", w)
	}
	s.send(ctx, s.collect(ctx, pods))
	return nil
}

// collect annotates the pods with when each was first seen and drops a pod
// whose name or UID repeats one before it.
func (s *Source) collect(ctx context.Context, pods []*v1.Pod) []*v1.Pod {
	seen := map[string]string{}
	names := map[string]bool{}
	out := pods[:0]
	for _, p := range pods {
		uid, key := string(p.UID), podspec.FullName(p)
		if names[key] || seen[uid] != "" {
			klog.FromContext(ctx).Error(nil, "Static pod defined twice by the manifest URL; ignoring the duplicate", "pod", key, "uid", uid)
			continue
		}
		ts, ok := s.seen[uid]
		if !ok {
			ts = s.cfg.Clock.Now().UTC().Format(time.RFC3339Nano)
		}
		seen[uid], names[key] = ts, true
		p.Annotations[podspec.ConfigFirstSeenAnnotationKey] = ts
		out = append(out, p)
	}
	s.seen = seen
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

// send puts pods on the channel, replacing an unread older set. An empty
// set is sent once only until pods come again: sent says whether it was.
func (s *Source) send(ctx context.Context, pods []*v1.Pod) (sent bool) {
	if len(pods) == 0 {
		s.seen = map[string]string{}
		if s.sent && s.empty {
			return false
		}
	}
	s.sent, s.empty = true, len(pods) == 0
	select {
	case <-s.updates:
	default:
	}
	select {
	case s.updates <- pods:
	case <-ctx.Done():
	}
	return true
}
