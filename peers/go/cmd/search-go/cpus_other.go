//go:build !linux

package main

import "errors"

func parseCPUs(s string) ([]int, error) { return nil, errors.New("--cpus needs Linux") }

func pinProcess(cpus []int) error { return errors.New("--cpus needs Linux") }
