// Package flagenv lets every flag of a service fall back to an environment
// variable, so the same binary is configured by flags on a command line and by
// environment in a deployment.
package flagenv

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
)

// EnvName is the environment variable read for a flag: the prefix and the flag
// name in upper case, dashes turned into underscores ("PLANNER_GRPC_ADDR").
func EnvName(prefix, flagName string) string {
	return strings.ToUpper(prefix + "_" + strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args into fs. A flag not given on the command line takes the
// value of its environment variable when that is set; command-line flags win.
// Every flag's usage names its variable, so -help documents both.
func Parse(fs *flag.FlagSet, prefix string, args []string) error {
	fs.VisitAll(func(f *flag.Flag) {
		f.Usage = fmt.Sprintf("%s (env %s)", f.Usage, EnvName(prefix, f.Name))
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })

	var errs []error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] {
			return
		}
		env := EnvName(prefix, f.Name)
		v, ok := os.LookupEnv(env)
		if !ok {
			return
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", env, v, err))
		}
	})
	return errors.Join(errs...)
}
