package svc

import (
	"errors"
	"net/http"

	typedbatchv1 "k8s.io/client-go/kubernetes/typed/batch/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/jobplane/jobplane/lib/auth"
)

// Impersonating returns Config.Impersonate for the API server of cfg: a
// client per call that acts as the caller (user and groups, the API
// server's Impersonate-User and Impersonate-Group headers) over the
// connections of one transport built once, with cfg's own credentials,
// rate limiter and wrappers. The executor needs the impersonate verb on
// users and groups; the caller's UID and extra (a service account token's
// pod and credential id) are not passed on, so that it needs no more.
func Impersonating(cfg *rest.Config) (func(*auth.Identity) (typedbatchv1.BatchV1Interface, error), error) {
	base, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return func(caller *auth.Identity) (typedbatchv1.BatchV1Interface, error) {
		if caller == nil || caller.User == "" {
			return nil, errors.New("no caller to impersonate")
		}
		client := &http.Client{
			Transport: transport.NewImpersonatingRoundTripper(transport.ImpersonationConfig{
				UserName: caller.User,
				Groups:   caller.Groups,
			}, base.Transport),
			Timeout: base.Timeout,
		}
		return typedbatchv1.NewForConfigAndClient(cfg, client)
	}, nil
}
