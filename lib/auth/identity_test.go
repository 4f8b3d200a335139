package auth

import "testing"

func TestTenantOfAServiceAccountIsItsNamespace(t *testing.T) {
	for user, want := range map[string]string{
		"system:serviceaccount:team-a:alice":  "system:serviceaccounts:team-a",
		"system:serviceaccount:team-a:runner": "system:serviceaccounts:team-a",
		"system:serviceaccount:team-b:alice":  "system:serviceaccounts:team-b",
		"alice":                               "alice",
		"system:anonymous":                    "system:anonymous",
		// Not a ServiceAccount's name: a user of its own.
		"system:serviceaccount:team-a":  "system:serviceaccount:team-a",
		"system:serviceaccount::alice":  "system:serviceaccount::alice",
		"system:serviceaccount:team-a:": "system:serviceaccount:team-a:",
	} {
		if got := (&Identity{User: user}).Tenant(); got != want {
			t.Errorf("Tenant of %q = %q, want %q", user, got, want)
		}
	}
}
