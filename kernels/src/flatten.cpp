// Placeholder: the owning component's implementation replaces this file.
