"""Domain files: the contract a domain team authors (fields, machine, rules, actions)."""

from .model import ActionSpec, Domain, FieldSpec, lint_domain, load_domain, domain_from_source

__all__ = ["ActionSpec", "Domain", "FieldSpec", "lint_domain", "load_domain", "domain_from_source"]
