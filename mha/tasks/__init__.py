"""What a model is measured by: its own task (sentence similarity or next-token loss), the
yardstick, and the heads study."""
