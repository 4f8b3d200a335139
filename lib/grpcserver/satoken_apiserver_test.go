package grpcserver_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	jobplanev1 "github.com/jobplane/jobplane/gen/jobplane/v1"
	"github.com/jobplane/jobplane/lib/grpcserver"
	"github.com/jobplane/jobplane/lib/kubetest"
)

// Against a real kube-apiserver: a token claiming to be the cluster's
// service account token (its issuer, its key id) that the cluster did not
// sign is refused against the cluster's keys, before any TokenReview; a
// token it signed is reviewed and served. Any service account may read the
// keys (the default binding of system:service-account-issuer-discovery),
// so the services, as their accounts, can.
func TestATokenTheClusterDidNotSignIsRefusedAgainstItsKeys(t *testing.T) {
	apiserver := kubetest.StartAPIServer(t)
	ctx := context.Background()
	kube := apiserver.Client
	token := benchToken(t, kube)
	srv := benchServer(t, func(c *grpcserver.Config) { c.Kubeconfig = apiserver.WriteKubeconfig(t) })
	client := jobplanev1.NewExecutorServiceClient(srv.Conn)
	req := &jobplanev1.GetJobRequest{Namespace: "team-a", Name: "nightly"}
	if _, err := client.GetJob(bearer(token), req); err != nil {
		t.Fatalf("a token the cluster signed: %v", err)
	}

	header, _, _ := strings.Cut(token, ".")
	claims := fmt.Sprintf(`{"iss":%q,"sub":"system:serviceaccount:team-a:alice","aud":["https://kubernetes.default.svc"]}`, kubetest.ServiceAccountIssuer)
	forged := header + "." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".bm90LXNpZ25lZA"
	_, err := client.GetJob(bearer(forged), req)
	wantCode(t, err, codes.Unauthenticated, "none of the cluster's keys signed it")

	asAccount := rest.AnonymousClientConfig(apiserver.Config)
	asAccount.BearerToken = token
	asAccountClient, err := kubernetes.NewForConfig(asAccount)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := asAccountClient.Discovery().RESTClient().Get().AbsPath("/openid/v1/jwks").DoRaw(ctx); err != nil {
		t.Errorf("a service account reading the cluster's keys: %v", err)
	}
}
