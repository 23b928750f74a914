"""sparkmirror's configuration: MM2's ``mm2.properties`` format loaded into one typed, frozen model."""

from sparkmirror.config.loader import load_config
from sparkmirror.config.model import ClusterConfig, FlowConfig, MirrorConfig, SparkSettings, is_secret_key

__all__ = ["ClusterConfig", "FlowConfig", "MirrorConfig", "SparkSettings", "is_secret_key", "load_config"]
