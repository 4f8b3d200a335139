package auth

import "testing"

func TestTenantOfAServiceAccountIsItsNamespace(t *testing.T) {
	for user, want := range map[string]string{
		"system:serviceaccount:team-a:alice":  "namespace:team-a",
		"system:serviceaccount:team-a:runner": "namespace:team-a",
		"system:serviceaccount:team-b:alice":  "namespace:team-b",
		"alice":                               "user:alice",
		"system:anonymous":                    "user:system:anonymous",
		// Not a ServiceAccount's name: a user of its own.
		"system:serviceaccount:team-a":  "user:system:serviceaccount:team-a",
		"system:serviceaccount::alice":  "user:system:serviceaccount::alice",
		"system:serviceaccount:team-a:": "user:system:serviceaccount:team-a:",
		// A user named as a namespace's share is not in it.
		"namespace:team-a": "user:namespace:team-a",
	} {
		if got := (&Identity{User: user}).Tenant(); got != want {
			t.Errorf("Tenant of %q = %q, want %q", user, got, want)
		}
	}
}
