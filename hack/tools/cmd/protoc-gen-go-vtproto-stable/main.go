// Command protoc-gen-go-vtproto-stable is vtprotobuf's protoc-gen-go-vtproto
// (the version pinned in go.mod) with one more feature, marshal_stable: the
// marshal_strict code with map entries written in key order, as protobuf-go's
// deterministic marshaling writes them. The pinned generator has that code
// (its marshal feature's Stable mode) but no option that turns it on; this
// sets it on the feature's generator. lib/grpcserver's codec relies on it:
// the same message is always the same bytes.
package main

import (
	"flag"
	"fmt"
	"os"
	"reflect"
	"strings"
	"unsafe"

	_ "github.com/planetscale/vtprotobuf/features/marshal"
	_ "github.com/planetscale/vtprotobuf/features/size"
	_ "github.com/planetscale/vtprotobuf/features/unmarshal"
	"github.com/planetscale/vtprotobuf/generator"
	"google.golang.org/protobuf/compiler/protogen"
)

func main() {
	strict, err := feature("marshal_strict")
	if err != nil {
		fmt.Fprintln(os.Stderr, "protoc-gen-go-vtproto-stable:", err)
		os.Exit(1)
	}
	generator.RegisterFeature("marshal_stable", func(gen *generator.GeneratedFile) generator.FeatureGenerator {
		g := strict(gen)
		stable := reflect.ValueOf(g).Elem().FieldByName("Stable")
		if !stable.IsValid() || stable.Kind() != reflect.Bool || !stable.CanSet() {
			panic(fmt.Sprintf("vtprotobuf's marshal generator %T has no settable Stable field", g))
		}
		stable.SetBool(true)
		return g
	})

	var cfg generator.Config
	var features string
	var f flag.FlagSet
	cfg.Poolable = generator.NewObjectSet()
	cfg.PoolableExclude = generator.NewObjectSet()
	f.StringVar(&features, "features", "", "list of features to generate (separated by '+')")
	protogen.Options{ParamFunc: f.Set}.Run(func(plugin *protogen.Plugin) error {
		gen, err := generator.NewGenerator(plugin, strings.Split(features, "+"), &cfg)
		if err != nil {
			return err
		}
		gen.Generate()
		return nil
	})
}

// feature is the registered generator feature name. The registry is not
// exported: a Generator made with that one feature holds it.
func feature(name string) (generator.Feature, error) {
	gen, err := generator.NewGenerator(&protogen.Plugin{}, []string{name}, &generator.Config{})
	if err != nil {
		return nil, err
	}
	v := reflect.ValueOf(gen).Elem().FieldByName("features")
	if !v.IsValid() || v.Type() != reflect.TypeFor[[]generator.Feature]() {
		return nil, fmt.Errorf("vtprotobuf's Generator has no features field of type []Feature")
	}
	fs := reflect.NewAt(v.Type(), unsafe.Pointer(v.UnsafeAddr())).Elem().Interface().([]generator.Feature)
	if len(fs) != 1 {
		return nil, fmt.Errorf("feature %q: %d generators", name, len(fs))
	}
	return fs[0], nil
}
