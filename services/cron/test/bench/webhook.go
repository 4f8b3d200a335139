package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// slowCreatesWebhook is the name of the admission webhook that makes Job
// creations slow in some namespaces (-slow-creates): an executor, or an API
// server, slow for one tenant's Jobs, as a policy engine's webhook can make
// it. Both controllers' crowded namespaces get it; their quiet tenants not.
const slowCreatesWebhook = "jobplane-bench-slow-creates"

// startSlowCreates serves a validating webhook on loopback that answers a
// Job creation in namespaces only after delay (allowing it), and registers
// it; stop unregisters it and stops serving.
func startSlowCreates(ctx context.Context, kube kubernetes.Interface, namespaces []string, delay time.Duration) (stop func(), err error) {
	cert, caBundle, err := loopbackCertificate()
	if err != nil {
		return nil, err
	}
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	server := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerSlowly(w, r, namespaces, delay) }),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() {
		if err := server.ServeTLS(listener, "", ""); !errors.Is(err, http.ErrServerClosed) {
			log.Printf("slow-creates webhook: %v", err)
		}
	}()
	webhooks := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: slowCreatesWebhook},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "slow-creates.bench.jobplane.dev",
			ClientConfig: admissionregistrationv1.WebhookClientConfig{
				URL: ptr.To("https://" + listener.Addr().String() + "/"), CABundle: caBundle,
			},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}},
			}},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: namespaces,
			}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To(int32(min(30, delay.Seconds()+5))),
		}},
	}
	if err := webhooks.Delete(ctx, slowCreatesWebhook, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return nil, err
	}
	if _, err := webhooks.Create(ctx, config, metav1.CreateOptions{}); err != nil {
		server.Close()
		return nil, fmt.Errorf("registering the slow-creates webhook: %w", err)
	}
	log.Printf("Job creations in %v answered after %v (webhook %s)", namespaces, delay, listener.Addr())
	return func() {
		if err := webhooks.Delete(context.Background(), slowCreatesWebhook, metav1.DeleteOptions{}); err != nil {
			log.Printf("unregistering the slow-creates webhook: %v", err)
		}
		server.Close()
	}, nil
}

// answerSlowly allows every request, after delay for those in namespaces.
func answerSlowly(w http.ResponseWriter, r *http.Request, namespaces []string, delay time.Duration) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	if slices.Contains(namespaces, review.Request.Namespace) {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// loopbackCertificate is a self-signed serving certificate for 127.0.0.1,
// and its PEM as the webhook's CA bundle.
func loopbackCertificate() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	template := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "jobplane bench webhook"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
