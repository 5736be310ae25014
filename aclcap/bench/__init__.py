"""aclcap bench: interleaved timing of eager, compiled and graph replay."""
