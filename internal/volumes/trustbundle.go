package volumes

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
)

// trustBundles is what a clusterTrustBundle projection reads: the Getter's
// ClusterTrustBundle reads.
type trustBundles interface {
	ClusterTrustBundle(ctx context.Context, name string) (*certificatesv1.ClusterTrustBundle, error)
	ClusterTrustBundles(ctx context.Context, signerName string, selector labels.Selector) ([]certificatesv1.ClusterTrustBundle, error)
}

// maxLabelSelectorLength bounds a projection's label selector, as
// upstream's ClusterTrustBundle manager.
const maxLabelSelectorLength = 100 * 1024

// anchorOrder orders the trust anchors of a bundle file: stable within a
// nodelet process (an unchanged set of anchors never rewrites the
// volume), different after each restart, so that nobody comes to rely on
// an order (upstream shuffles them).
var anchorOrder = maphash.MakeSeed()

// clusterTrustBundle writes the trust anchors a clusterTrustBundle
// projection selects into one file, as upstream's projected volume: the
// file's mode and owner are those of a service account token.
func (m *Manager) clusterTrustBundle(ctx context.Context, pod *v1.Pod, p *v1.ClusterTrustBundleProjection, def os.FileMode, files map[string]file) error {
	if m.getter == nil {
		return errNoAPI
	}
	data, err := trustAnchors(ctx, m.getter, p, anchorOrder)
	if err != nil {
		return err
	}
	files[p.Path] = ownedFile(pod, data, def)
	return nil
}

// trustAnchors is the PEM file of the trust anchors p selects, by name or
// by signer and label selector; with optional, a missing bundle (or no
// bundle matching) is an empty file, as upstream.
func trustAnchors(ctx context.Context, g trustBundles, p *v1.ClusterTrustBundleProjection, seed maphash.Seed) ([]byte, error) {
	allowMissing := p.Optional != nil && *p.Optional
	switch {
	case p.Name != nil:
		return trustAnchorsByName(ctx, g, *p.Name, allowMissing, seed)
	case p.SignerName != nil:
		return trustAnchorsBySigner(ctx, g, *p.SignerName, p.LabelSelector, allowMissing, seed)
	}
	return nil, errors.New("ClusterTrustBundle projection requires either name or signerName to be set")
}

// trustAnchorsByName is upstream's GetTrustAnchorsByName: the normalized
// anchors of one bundle.
func trustAnchorsByName(ctx context.Context, g trustBundles, name string, allowMissing bool, seed maphash.Seed) ([]byte, error) {
	ctb, err := g.ClusterTrustBundle(ctx, name)
	if apierrors.IsNotFound(err) && allowMissing {
		return []byte{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("while getting ClusterTrustBundle: %w", err)
	}
	return normalizeTrustAnchors([]string{ctb.Spec.TrustBundle}, seed), nil
}

// trustAnchorsBySigner is upstream's GetTrustAnchorsBySigner: the
// normalized anchors of every bundle of signerName that labelSelector
// selects (nil selects none, empty selects all).
func trustAnchorsBySigner(ctx context.Context, g trustBundles, signerName string, labelSelector *metav1.LabelSelector, allowMissing bool, seed maphash.Seed) ([]byte, error) {
	selector, err := metav1.LabelSelectorAsSelector(labelSelector)
	if err != nil {
		return nil, fmt.Errorf("while parsing label selector: %w", err)
	}
	if n := len(selector.String()); n > maxLabelSelectorLength {
		return nil, fmt.Errorf("label selector length (%d) is larger than %d", n, maxLabelSelectorLength)
	}
	ctbs, err := g.ClusterTrustBundles(ctx, signerName, selector)
	if err != nil {
		return nil, fmt.Errorf("while listing ClusterTrustBundles matching label selector %v: %w", labelSelector, err)
	}
	bundles := make([]string, 0, len(ctbs))
	for i := range ctbs {
		if ctbs[i].Spec.SignerName == signerName {
			bundles = append(bundles, ctbs[i].Spec.TrustBundle)
		}
	}
	klog.FromContext(ctx).V(5).Info("ClusterTrustBundles selected", "signerName", signerName, "labelSelector", selector.String(), "count", len(bundles))
	if len(bundles) == 0 {
		if allowMissing {
			return []byte{}, nil
		}
		return nil, errors.New("combination of signerName and labelSelector matched zero ClusterTrustBundles")
	}
	return normalizeTrustAnchors(bundles, seed), nil
}

// normalizeTrustAnchors is upstream's normalizeTrustAnchors: every PEM
// block of the bundles (whatever its type; what is not PEM is skipped),
// deduplicated by content, re-encoded as a CERTIFICATE block without
// headers and concatenated. The order is by a hash keyed by seed (ties by
// content): the same for the same anchors and seed.
func normalizeTrustAnchors(bundles []string, seed maphash.Seed) []byte {
	set := map[string]struct{}{}
	for _, b := range bundles {
		rest := []byte(b)
		for {
			var block *pem.Block
			block, rest = pem.Decode(rest)
			if block == nil {
				break
			}
			set[string(block.Bytes)] = struct{}{}
		}
	}
	anchors := make([]string, 0, len(set))
	for a := range set {
		anchors = append(anchors, a)
	}
	slices.SortFunc(anchors, func(a, b string) int {
		ha, hb := maphash.String(seed, a), maphash.String(seed, b)
		switch {
		case ha < hb:
			return -1
		case ha > hb:
			return 1
		}
		return strings.Compare(a, b)
	})
	var out bytes.Buffer
	for _, a := range anchors {
		_ = pem.Encode(&out, &pem.Block{Type: "CERTIFICATE", Bytes: []byte(a)})
	}
	return append([]byte{}, out.Bytes()...)
}
