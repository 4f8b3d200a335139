package apierr

import (
	"math/rand/v2"
	"strings"
	"testing"

	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
)

// The fast checks accept exactly what apimachinery's accept: on names built
// from the characters that matter (and one that never does), of every length
// around the limits.
func TestFastNameChecksAreApimachinerys(t *testing.T) {
	names := []string{"", "a", "-", ".", "a.", ".a", "a..b", "a-", "-a", "a-b", "a.b", "A", "a_b", "a b", "é",
		strings.Repeat("a", maxLabel), strings.Repeat("a", maxLabel+1),
		strings.Repeat("a", maxSubdomain), strings.Repeat("a", maxSubdomain+1),
		strings.Repeat("a.", maxSubdomain/2) + "a", strings.Repeat("a.", maxSubdomain/2+1) + "a"}
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "az09-.A_"
	for range 200_000 {
		b := make([]byte, r.IntN(12))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		names = append(names, string(b))
	}
	for _, name := range names {
		if got, want := isDNSSubdomain(name), len(apimachineryvalidation.NameIsDNSSubdomain(name, false)) == 0; got != want {
			t.Errorf("subdomain %q: fast %v, apimachinery %v", name, got, want)
		}
		if got, want := len(name) <= maxLabel && isDNSLabel(name), len(apimachineryvalidation.ValidateNamespaceName(name, false)) == 0; got != want {
			t.Errorf("namespace %q: fast %v, apimachinery %v", name, got, want)
		}
	}
}
