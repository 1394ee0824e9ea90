package images

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageUser returns the user an image runs as by default, as the runtime
// reports it: a numeric uid, or a user name (uid nil).
func (p *Puller) ImageUser(ctx context.Context, imageRef string) (*int64, string, error) {
	resp, err := p.svc.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: imageRef}, false)
	if err != nil {
		return nil, "", err
	}
	img := resp.GetImage()
	if img == nil {
		return nil, "", fmt.Errorf("image %q not found", imageRef)
	}
	if img.Uid != nil {
		uid := img.Uid.Value
		return &uid, "", nil
	}
	return nil, img.Username, nil
}
