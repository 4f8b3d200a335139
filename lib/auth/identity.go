// Package auth decides who calls a jobplane service and what the caller may
// do, the way the Kubernetes API server decides it and with the cluster's
// own answers: a bearer token is checked with the TokenReview API, a client
// certificate verified against the client CA names its subject (CN the user,
// O the groups), and every RPC is authorized with a SubjectAccessReview of
// the verb, resource and namespace it acts on (the table in rules.go), so
// that jobplane never does for a caller what the caller could not do
// himself; an HTTP request (/metrics) is authorized on its non-resource URL.
// Both answers are cached for a short, bounded time.
package auth

import (
	"context"
	"slices"
	"strings"
)

// The identity of a caller that presents no credentials, as Kubernetes
// names it; only the -authn-anonymous development mode gives it.
const (
	AnonymousUser        = "system:anonymous"
	UnauthenticatedGroup = "system:unauthenticated"
)

// How an identity was established.
const (
	MethodToken       = "token"
	MethodCertificate = "x509"
	MethodAnonymous   = "anonymous"
)

// Identity is an authenticated caller, in the API server's terms.
type Identity struct {
	User   string
	UID    string
	Groups []string
	// Extra is what the authenticator adds (a service account token's pod
	// and credential id).
	Extra map[string][]string
	// Method is MethodToken, MethodCertificate or MethodAnonymous.
	Method string
}

// Anonymous is the identity of a caller without credentials.
func Anonymous() *Identity {
	return &Identity{User: AnonymousUser, Groups: []string{UnauthenticatedGroup}, Method: MethodAnonymous}
}

// IsAnonymous says whether id is the anonymous identity.
func (id *Identity) IsAnonymous() bool {
	return id.User == AnonymousUser || slices.Contains(id.Groups, UnauthenticatedGroup)
}

// serviceAccountPrefix starts a ServiceAccount's user name,
// system:serviceaccount:<namespace>:<name>.
const serviceAccountPrefix = "system:serviceaccount:"

// Tenant is whom id's calls are shared out to: a ServiceAccount's
// namespace ("namespace:<namespace>"), so that more accounts in one
// namespace buy no larger share; any other user is a tenant of its own
// ("user:<name>"). The prefixes keep a user from naming himself into a
// namespace's share.
func (id *Identity) Tenant() string {
	rest, ok := strings.CutPrefix(id.User, serviceAccountPrefix)
	if !ok {
		return "user:" + id.User
	}
	namespace, name, ok := strings.Cut(rest, ":")
	if !ok || namespace == "" || name == "" {
		return "user:" + id.User
	}
	return "namespace:" + namespace
}

type identityKey struct{}

// NewContext returns ctx carrying id.
func NewContext(ctx context.Context, id *Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity of the caller of the RPC ctx belongs to:
// every handler behind the chassis has one.
func FromContext(ctx context.Context) (*Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(*Identity)
	return id, ok && id != nil
}
