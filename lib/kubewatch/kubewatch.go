// Package kubewatch follows a Kubernetes watch for as long as a caller
// wants it: the API server closes watches after a while, and a stream built
// on one (WatchJobs, WatchJobInstances) resumes from the last version seen.
package kubewatch

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/watch"
)

// MinLife: a watch the API server closes sooner than this is re-established
// only after this long, so that a server closing every watch at once is not
// asked again in a loop.
const MinLife = time.Second

// Opener opens a watch from a resourceVersion (with bookmarks, preferably).
type Opener func(ctx context.Context, resourceVersion string) (watch.Interface, error)

// Follow relays the watches open gives, from resourceVersion, to handle:
// every added, modified or deleted object with its resourceVersion.
// Bookmarks only move the version. It returns nil when ctx ends, the
// error of a watch that fails (a too-old version is the API server's
// Expired or Gone), or the first error of handle.
func Follow(ctx context.Context, resourceVersion string, open Opener, handle func(watch.Event) error) error {
	for {
		started := time.Now()
		var err error
		if resourceVersion, err = followOnce(ctx, resourceVersion, open, handle); err != nil || ctx.Err() != nil {
			return err
		}
		if time.Since(started) < MinLife {
			select {
			case <-time.After(MinLife):
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// followOnce relays one watch until the API server closes it; it returns
// the last resourceVersion seen.
func followOnce(ctx context.Context, resourceVersion string, open Opener, handle func(watch.Event) error) (string, error) {
	watcher, err := open(ctx, resourceVersion)
	if err != nil {
		return resourceVersion, err
	}
	defer watcher.Stop()
	for {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			return resourceVersion, nil
		case ev, ok = <-watcher.ResultChan():
		}
		if !ok {
			return resourceVersion, nil
		}
		if ev.Type == watch.Error {
			return resourceVersion, apierrors.FromObject(ev.Object)
		}
		if m, err := meta.Accessor(ev.Object); err == nil {
			resourceVersion = m.GetResourceVersion()
		}
		if ev.Type == watch.Bookmark {
			continue
		}
		if err := handle(ev); err != nil {
			return resourceVersion, err
		}
	}
}
