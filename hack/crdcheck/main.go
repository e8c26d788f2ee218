// crdcheck (built by hack/kube-bin.sh, run by hack/crdcheck.sh): run kube-apiserver's own CRD validation (structural schema, defaults, CEL compile and
// cost) on CRD files, then validate sample objects (prune, default, OpenAPI, CEL) against them.
// Usage: crdcheck crd.yaml... [-- object.yaml...]
package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"
)

type kindSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

func main() {
	scheme := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(scheme)
	_ = apiextensions.AddToScheme(scheme)
	kinds := map[string]kindSchema{}
	failed := false
	objects := false
	for _, f := range os.Args[1:] {
		if f == "--" {
			objects = true
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			panic(err)
		}
		for _, doc := range bytes.Split(data, []byte("\n---\n")) {
			if len(bytes.TrimSpace(doc)) == 0 || strings.TrimSpace(stripComments(string(doc))) == "" || strings.TrimSpace(stripComments(string(doc))) == "---" {
				continue
			}
			if !objects {
				var v1 apiextensionsv1.CustomResourceDefinition
				if err := yaml.UnmarshalStrict(doc, &v1); err != nil {
					fmt.Printf("FAIL %s: decode: %v\n", f, err)
					failed = true
					continue
				}
				apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(&v1)
				var crd apiextensions.CustomResourceDefinition
				if err := scheme.Convert(&v1, &crd, nil); err != nil {
					panic(err)
				}
				errs := validation.ValidateCustomResourceDefinition(context.TODO(), &crd)
				if len(errs) > 0 {
					failed = true
					for _, e := range errs {
						fmt.Printf("FAIL %s: %v\n", f, e)
					}
					continue
				}
				fmt.Printf("OK   %s: accepted by apiextensions validation\n", f)
				s := crd.Spec.Validation
				if s == nil {
					s = crd.Spec.Versions[0].Schema
				}
				st, err := structuralschema.NewStructural(s.OpenAPIV3Schema)
				if err != nil {
					panic(err)
				}
				v, _, err := apiservervalidation.NewSchemaValidator(s.OpenAPIV3Schema)
				if err != nil {
					panic(err)
				}
				kinds[crd.Spec.Names.Kind] = kindSchema{st, v, cel.NewValidator(st, true, celconfig.PerCallLimit)}
				continue
			}
			var obj map[string]interface{}
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				fmt.Printf("FAIL %s: %v\n", f, err)
				failed = true
				continue
			}
			kind, _ := obj["kind"].(string)
			name := ""
			if md, ok := obj["metadata"].(map[string]interface{}); ok {
				name, _ = md["name"].(string)
			}
			ks, ok := kinds[kind]
			if !ok {
				fmt.Printf("SKIP %s %s: no CRD\n", kind, name)
				continue
			}
			pruneOpts := structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true}
			unknown := structuralpruning.PruneWithOptions(obj, ks.structural, true, pruneOpts)
			// As the apiserver's unstructuredDefaulter: nulls of non-nullable fields go, then defaults.
			structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, ks.structural)
			structuraldefaulting.Default(obj, ks.structural)
			errs := apiservervalidation.ValidateCustomResource(field.NewPath(""), obj, ks.validator)
			celErrs, _ := ks.cel.Validate(context.TODO(), field.NewPath(""), ks.structural, obj, nil, celconfig.RuntimeCELCostBudget)
			errs = append(errs, celErrs...)
			out, _ := yaml.Marshal(obj["spec"])
			if len(errs) == 0 {
				fmt.Printf("VALID   %s %s pruned=%v\n", kind, name, unknown)
			} else {
				fmt.Printf("INVALID %s %s pruned=%v\n", kind, name, unknown)
				for _, e := range errs {
					fmt.Printf("    %v\n", e)
				}
			}
			if os.Getenv("SHOW_SPEC") != "" {
				fmt.Println(string(out))
			}
		}
	}
	if failed {
		os.Exit(1)
	}
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}
