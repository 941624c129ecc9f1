"""What a build is: the matrix, arch lists, version, and the exact torch and toolkits."""
