package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// Apply creates, as the admin, the namespaces, service accounts and RBAC
// objects of the YAML manifests at paths (deploy/kubernetes/*.yaml), and
// returns every object the files hold, those of other kinds included (not
// created).
func (a *APIServer) Apply(tb testing.TB, paths ...string) []runtime.Object {
	tb.Helper()
	ctx := context.Background()
	var objects []runtime.Object
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				tb.Fatalf("%s: %v", path, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
			if err != nil {
				tb.Fatalf("%s: %v", path, err)
			}
			objects = append(objects, obj)
			switch o := obj.(type) {
			case *corev1.Namespace:
				_, err = a.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
			case *corev1.ServiceAccount:
				_, err = a.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = a.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = a.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.Role:
				_, err = a.Client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.RoleBinding:
				_, err = a.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *admissionregistrationv1.ValidatingAdmissionPolicy:
				_, err = a.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
				_, err = a.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			default:
				err = fmt.Errorf("Apply does not create %T yet", obj)
			}
			if err != nil {
				tb.Fatalf("%s: creating %T: %v", path, obj, err)
			}
		}
	}
	return objects
}

// ServiceAccountConfig reaches the API server as the ServiceAccount
// namespace/name, with a token of the TokenRequest API valid for an hour.
func (a *APIServer) ServiceAccountConfig(tb testing.TB, namespace, name string) *rest.Config {
	tb.Helper()
	tr, err := a.Client.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(a.Config)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// Permission is one verb on one resource of one API group: the unit of a
// PolicyRule.
type Permission struct {
	Group, Resource, Verb string
}

func (p Permission) String() string {
	if p.Group == "" {
		return p.Verb + " " + p.Resource
	}
	return p.Verb + " " + p.Resource + "." + p.Group
}

// permissions expands rules (without resourceNames or nonResourceURLs)
// into their permissions.
func permissions(tb testing.TB, rules []rbacv1.PolicyRule) []Permission {
	tb.Helper()
	var out []Permission
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			tb.Fatalf("rule %v: resourceNames and nonResourceURLs are not expanded", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, Permission{Group: g, Resource: res, Verb: v})
				}
			}
		}
	}
	return out
}

func rulesOf(perms []Permission) []rbacv1.PolicyRule {
	rules := make([]rbacv1.PolicyRule, 0, len(perms))
	for _, p := range perms {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{p.Group}, Resources: []string{p.Resource}, Verbs: []string{p.Verb}})
	}
	return rules
}

// Step is one request a component makes, as a role test replays it.
type Step struct {
	What string
	Do   func(context.Context) error
}

// ProbeSteps is a probe for EachPermissionIsNeeded: it runs every step,
// each run bounded by within, and fails with each failing step named.
func ProbeSteps(steps []Step, within time.Duration) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		var errs []error
		for _, step := range steps {
			if err := step.Do(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", step.What, err))
			}
		}
		return errors.Join(errs...)
	}
}

// EachPermissionIsNeeded shows that the role (a ClusterRole when namespace
// is empty, else a Role) holds only what probe needs: probe succeeds with
// the role as it is; without any one of its permissions, probe fails
// within within; and it succeeds again once the role is restored. It
// returns the permissions probe did not need.
func (a *APIServer) EachPermissionIsNeeded(tb testing.TB, namespace, role string, within time.Duration, probe func() error) []Permission {
	tb.Helper()
	ctx := context.Background()
	get := func() []rbacv1.PolicyRule {
		if namespace == "" {
			r, err := a.Client.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
			if err != nil {
				tb.Fatal(err)
			}
			return r.Rules
		}
		r, err := a.Client.RbacV1().Roles(namespace).Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		return r.Rules
	}
	set := func(rules []rbacv1.PolicyRule) {
		var err error
		if namespace == "" {
			var r *rbacv1.ClusterRole
			if r, err = a.Client.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{}); err == nil {
				r.Rules = rules
				_, err = a.Client.RbacV1().ClusterRoles().Update(ctx, r, metav1.UpdateOptions{})
			}
		} else {
			var r *rbacv1.Role
			if r, err = a.Client.RbacV1().Roles(namespace).Get(ctx, role, metav1.GetOptions{}); err == nil {
				r.Rules = rules
				_, err = a.Client.RbacV1().Roles(namespace).Update(ctx, r, metav1.UpdateOptions{})
			}
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	eventually := func(want bool) (lastErr error, ok bool) {
		deadline := time.Now().Add(within)
		for {
			lastErr = probe()
			if (lastErr == nil) == want {
				return lastErr, true
			}
			if time.Now().After(deadline) {
				return lastErr, false
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	original := get()
	if err, ok := eventually(true); !ok {
		tb.Fatalf("%s with all its rules: %v", role, err)
	}
	all := permissions(tb, original)
	var unneeded []Permission
	for i, p := range all {
		set(rulesOf(append(append([]Permission{}, all[:i]...), all[i+1:]...)))
		if _, ok := eventually(false); !ok {
			unneeded = append(unneeded, p)
		} else if err := probe(); err != nil {
			tb.Logf("%s without %s: %v", role, p, err)
		}
		set(original)
		if err, ok := eventually(true); !ok {
			tb.Fatalf("%s restored: %v", role, err)
		}
	}
	return unneeded
}
