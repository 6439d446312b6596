package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// File extensions that shell completion offers for each kind of input.
var (
	fusionExts   = []string{"yaml", "yml"}
	planExts     = []string{"json"}
	anyInputExts = []string{"yaml", "yml", "json"}
	topologyExts = []string{"yaml", "yml", "json"}
)

// fileArg completes a command's single file argument with the files ending
// in one of exts (and directories); after it, nothing.
func fileArg(exts ...string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return exts, cobra.ShellCompDirectiveFilterFileExt
	}
}

// fileFlag marks the flag name of cmd as taking a file name ending in one
// of exts, or any file when exts is empty.
func fileFlag(cmd *cobra.Command, name string, exts ...string) {
	mustRegister(cmd.MarkFlagFilename(name, exts...))
}

// keywordOrFile completes a flag that takes either one of keywords or a
// file name ending in one of exts: --topology default|FILE. Shells only
// complete files when a completion function returns nothing, so it lists
// the matching files and directories itself.
func keywordOrFile(cmd *cobra.Command, name string, keywords []string, exts ...string) {
	mustRegister(cmd.RegisterFlagCompletionFunc(name, func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var out []cobra.Completion
		for _, k := range keywords {
			if strings.HasPrefix(k, toComplete) {
				out = append(out, k)
			}
		}
		files, dirs := matchFiles(toComplete, exts)
		out = append(out, files...)
		out = append(out, dirs...)
		directive := cobra.ShellCompDirectiveNoFileComp
		if len(out) == 1 && len(dirs) == 1 {
			directive |= cobra.ShellCompDirectiveNoSpace // a lone directory is continued, not ended
		}
		return out, directive
	}))
}

// matchFiles returns the files whose path starts with prefix and ends in
// one of exts, and the directories (with a trailing slash) starting with
// prefix, each sorted. Hidden entries are listed only when prefix names
// a hidden entry's start, as shells do.
func matchFiles(prefix string, exts []string) (files, dirs []string) {
	dir, base := filepath.Split(prefix)
	entries, err := os.ReadDir(cmpDir(dir))
	if err != nil {
		return nil, nil
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, base) || (strings.HasPrefix(n, ".") && !strings.HasPrefix(base, ".")) {
			continue
		}
		isDir := e.IsDir()
		if e.Type()&os.ModeSymlink != 0 {
			fi, err := os.Stat(filepath.Join(cmpDir(dir), n))
			isDir = err == nil && fi.IsDir()
		}
		switch {
		case isDir:
			dirs = append(dirs, dir+n+"/")
		case hasExt(n, exts):
			files = append(files, dir+n)
		}
	}
	slices.Sort(files)
	slices.Sort(dirs)
	return files, dirs
}

// cmpDir is the directory to list for the directory part of a completion
// prefix: the current directory when there is none.
func cmpDir(dir string) string {
	if dir == "" {
		return "."
	}
	return dir
}

// hasExt reports whether name ends in "." and one of exts.
func hasExt(name string, exts []string) bool {
	ext := strings.TrimPrefix(filepath.Ext(name), ".")
	return ext != "" && slices.Contains(exts, ext)
}

// setUpCompletion shows cobra's completion command in the help, gives it
// and its shell subcommands examples, and makes a missing or unknown shell
// a usage error (exit 2) like any other command's.
func setUpCompletion(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	comp, _, err := root.Find([]string{"completion"})
	if err != nil || comp == root {
		return
	}
	comp.Example = `  # bash, for the current shell, then for every new one
  source <(nvcomm completion bash)
  nvcomm completion bash > ~/.local/share/bash-completion/completions/nvcomm

  # zsh (compinit enabled), fish
  nvcomm completion zsh > "${fpath[1]}/_nvcomm"
  nvcomm completion fish > ~/.config/fish/completions/nvcomm.fish`
	comp.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usageError{fmt.Errorf("unknown shell %q for %q (expected %s)", args[0], cmd.CommandPath(), shellList())}
		}
		return nil
	}
	comp.RunE = func(cmd *cobra.Command, _ []string) error {
		cmd.PrintErr(cmd.UsageString())
		return usageError{fmt.Errorf("missing shell (%s)", shellList())}
	}
	for _, sh := range comp.Commands() {
		sh.Example = shellExamples[sh.Name()]
		sh.Args = noArgs
	}
}

// shells are the shells cobra's completion command writes scripts for, in
// the order the messages name them.
var shells = []string{"bash", "zsh", "fish", "powershell"}

// shellList is "bash, zsh, fish or powershell".
func shellList() string {
	return strings.Join(shells[:len(shells)-1], ", ") + " or " + shells[len(shells)-1]
}

// shellExamples holds the example of each shell's completion subcommand.
var shellExamples = map[string]string{
	"bash":       "  source <(nvcomm completion bash)",
	"zsh":        "  nvcomm completion zsh > \"${fpath[1]}/_nvcomm\"",
	"fish":       "  nvcomm completion fish | source",
	"powershell": "  nvcomm completion powershell | Out-String | Invoke-Expression",
}
