"""Every rule, in code order: the one table the selection, the docs and ``explain`` read."""

from __future__ import annotations

from onboard.lint.rules.automodel import (
    ConflictingModelCapabilities,
    MissingModelCapabilities,
    MissingTieSupport,
    MissingTieWeights,
)
from onboard.lint.rules.base import Rule
from onboard.lint.rules.common import (
    DuplicateRegistryKey,
    UnknownRegistryKey,
    UnresolvedRegistryClass,
    UnresolvedRegistryModule,
)
from onboard.lint.rules.coverage import MissingDocsPage, MissingTestCase, MissingTestConfig
from onboard.lint.rules.mobius import (
    AliasIgnoresSlidingWindow,
    AliasMissingQkNorm,
    AliasMissingQkvBias,
    IgnoredInlineRegistrationOption,
    IgnoredRegistryConfigClass,
    OrphanRegistryMetadata,
)
from onboard.lint.rules.provenance import StaleGeneratedSource

RULES: tuple[type[Rule], ...] = (
    UnresolvedRegistryModule,
    UnresolvedRegistryClass,
    UnknownRegistryKey,
    DuplicateRegistryKey,
    IgnoredInlineRegistrationOption,
    IgnoredRegistryConfigClass,
    AliasMissingQkNorm,
    AliasIgnoresSlidingWindow,
    AliasMissingQkvBias,
    OrphanRegistryMetadata,
    MissingTieSupport,
    MissingTieWeights,
    MissingModelCapabilities,
    ConflictingModelCapabilities,
    MissingTestConfig,
    MissingTestCase,
    MissingDocsPage,
    StaleGeneratedSource,
)

__all__ = ["RULES", "Rule"]
