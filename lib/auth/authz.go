package auth

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"time"

	"golang.org/x/sync/singleflight"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
)

// Attributes are what a request does, in the API server's authorization
// vocabulary: a verb on a resource of an API group, in a namespace ("" is
// every namespace, the cluster scope) and, for verbs on one object, its name;
// or, for a non-resource URL (/metrics), a verb on its Path alone.
type Attributes struct {
	Verb        string
	Group       string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// Path is a non-resource URL; set, the fields of a resource are empty.
	Path string
}

// Decision is an authorizer's answer.
type Decision struct {
	Allowed bool
	// Reason is the authorizer's own explanation, when it gives one.
	Reason string
}

// Authorizer decides whether id may do what a says.
type Authorizer interface {
	Authorize(ctx context.Context, id *Identity, a Attributes) (Decision, error)
}

// ForbiddenMessage says what id may not do, in the API server's words
// (k8s.io/apiserver's forbiddenMessage), so a caller reads the same sentence
// from jobplane as from kubectl.
func ForbiddenMessage(user string, a Attributes) string {
	if a.Path != "" {
		return fmt.Sprintf("User %q cannot %s path %q", user, a.Verb, a.Path)
	}
	resource := a.Resource
	if a.Subresource != "" {
		resource += "/" + a.Subresource
	}
	if a.Namespace != "" {
		return fmt.Sprintf("User %q cannot %s resource %q in API group %q in the namespace %q", user, a.Verb, resource, a.Group, a.Namespace)
	}
	return fmt.Sprintf("User %q cannot %s resource %q in API group %q at the cluster scope", user, a.Verb, resource, a.Group)
}

// deniedMessage is ForbiddenMessage followed by the authorizer's reason,
// when it gave one.
func deniedMessage(user string, a Attributes, d Decision) string {
	msg := ForbiddenMessage(user, a)
	if d.Reason != "" {
		msg += ": " + d.Reason
	}
	return msg
}

// SubjectAccessReviewer asks the API server with SubjectAccessReviews, so
// that the cluster's RBAC (and any other authorizer it runs) decides.
// Answers, allowed or not, are reused for at most the TTL.
type SubjectAccessReviewer struct {
	client   kubernetes.Interface
	ttl      time.Duration
	cache    *cache.LRUExpireCache // reviewKey -> Decision
	inflight singleflight.Group
	budget   *ReviewBudget // nil: reviews are not paced here
	log      *slog.Logger
}

var _ Authorizer = (*SubjectAccessReviewer)(nil)

// NewSubjectAccessReviewer returns an authorizer asking the API server
// through client, each review within budget (nil: unpaced) in the lane of
// the caller's tenant.
func NewSubjectAccessReviewer(cfg Config, client kubernetes.Interface, budget *ReviewBudget, log *slog.Logger) *SubjectAccessReviewer {
	return &SubjectAccessReviewer{client: client, ttl: cfg.AuthzCacheTTL, cache: cache.NewLRUExpireCache(cfg.AuthzCacheSize), budget: budget, log: log}
}

// Authorize implements Authorizer.
func (r *SubjectAccessReviewer) Authorize(ctx context.Context, id *Identity, a Attributes) (Decision, error) {
	key := reviewKey(id, a)
	if v, ok := r.cache.Get(key); ok {
		return v.(Decision), nil
	}
	wait := func(ctx context.Context) error { return r.budget.wait(ctx, tenantLane(id.Tenant())) }
	v, err := shareReview(ctx, &r.inflight, key, wait, func(reviewCtx context.Context) (any, error) {
		spec := authorizationv1.SubjectAccessReviewSpec{
			User:   id.User,
			UID:    id.UID,
			Groups: id.Groups,
			Extra:  extraValues(id.Extra),
		}
		if a.Path != "" {
			spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Path: a.Path, Verb: a.Verb}
		} else {
			spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
				Namespace:   a.Namespace,
				Verb:        a.Verb,
				Group:       a.Group,
				Resource:    a.Resource,
				Subresource: a.Subresource,
				Name:        a.Name,
			}
		}
		review, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(reviewCtx,
			&authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return nil, err
		}
		d := Decision{Allowed: review.Status.Allowed && !review.Status.Denied, Reason: review.Status.Reason}
		if review.Status.EvaluationError != "" {
			r.log.Warn("SubjectAccessReview evaluation error", "user", id.User, "attributes", a, "err", review.Status.EvaluationError)
		}
		if r.ttl > 0 {
			r.cache.Add(key, d, r.ttl)
		}
		return d, nil
	})
	if err != nil {
		if st := budgetStatus(ctx, err, "SubjectAccessReview"); st != nil {
			return Decision{}, st
		}
		return Decision{}, err
	}
	return v.(Decision), nil
}

func extraValues(extra map[string][]string) map[string]authorizationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = v
	}
	return out
}

// reviewKey is the whole question, every string length-prefixed so that no
// two questions share a key: who (every part of the identity an authorizer
// may look at) and what.
func reviewKey(id *Identity, a Attributes) string {
	var b []byte
	field := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	list := func(l []string) {
		b = strconv.AppendInt(b, int64(len(l)), 10)
		b = append(b, '#')
		for _, s := range l {
			field(s)
		}
	}
	field(id.User)
	field(id.UID)
	groups := slices.Clone(id.Groups)
	sort.Strings(groups)
	list(groups)
	keys := make([]string, 0, len(id.Extra))
	for k := range id.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b = strconv.AppendInt(b, int64(len(keys)), 10)
	b = append(b, '#')
	for _, k := range keys {
		field(k)
		list(id.Extra[k])
	}
	for _, s := range []string{a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace, a.Name, a.Path} {
		field(s)
	}
	return string(b)
}
