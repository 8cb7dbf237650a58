package controllers

import (
	"testing"
	"time"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(1000, 0)
	ex := NewExpectations(func() time.Time { return now })
	if !ex.Satisfied("none") {
		t.Fatal("an owner with no expectation is not satisfied")
	}
	ex.Expect("a", 2, nil)
	ex.Expect("b", 0, []string{"ns/p1", "ns/p2"})
	if ex.Satisfied("a") || ex.Satisfied("b") {
		t.Fatal("fresh expectations reported satisfied")
	}
	ex.CreationsObserved("a", 1)
	if ex.Satisfied("a") {
		t.Fatal("a satisfied with one creation outstanding")
	}
	ex.CreationsObserved("a", 5) // more than expected: never below zero
	if !ex.Satisfied("a") {
		t.Fatal("a not satisfied after its creations")
	}
	ex.DeletionObserved("b", "ns/p1")
	ex.DeletionObserved("b", "ns/p1") // the same pod twice counts once
	ex.DeletionObserved("b", "ns/other")
	if ex.Satisfied("b") {
		t.Fatal("b satisfied with one deletion outstanding")
	}
	ex.DeletionObserved("b", "ns/p2")
	if !ex.Satisfied("b") {
		t.Fatal("b not satisfied after both deletions")
	}
	ex.Expect("c", 1, nil)
	now = now.Add(ExpectationsTimeout - time.Second)
	if ex.Satisfied("c") {
		t.Fatal("c expired too early")
	}
	now = now.Add(2 * time.Second)
	if !ex.Satisfied("c") {
		t.Fatal("c did not expire after the timeout")
	}
	ex.Expect("d", 3, nil)
	ex.Remove("d")
	if !ex.Satisfied("d") {
		t.Fatal("a removed owner still held back")
	}
}
