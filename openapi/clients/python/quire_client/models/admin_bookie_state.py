from enum import StrEnum


class AdminBookieState(StrEnum):
    DECOMMISSIONED = "decommissioned"
    DECOMMISSIONING = "decommissioning"
    DOWN = "down"
    READONLY = "readonly"
    WRITABLE = "writable"

    def __str__(self) -> str:
        return str(self.value)
