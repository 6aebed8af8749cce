//go:build !linux

package compat

import "os/exec"

func setChildAttrs(cmd *exec.Cmd) {}
